package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiplock/skiplock/internal/subproc"
)

// proc is one worker process.
type proc struct {
	*subproc.Process
	id      string
	started time.Time
	ended   time.Time  // when it was found dead; set before Done closes
	stats   *poolStats // reported by a worker that exited cleanly; set before Done closes

	expected atomic.Bool // we killed or stopped it
}

// gone reports whether the process has exited.
func (p *proc) gone() bool { return p.Exited() }

// syncWriter serialises the worker processes' log lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// startProc starts a new worker process in slot, with a fresh id (chaos-w<slot>.<gen>),
// and makes it the slot's current process.
func (r *runner) startProc(slot int) (*proc, error) {
	o := r.o
	for len(r.procs) <= slot {
		r.procs = append(r.procs, nil)
		r.gens = append(r.gens, 0)
	}
	id := fmt.Sprintf("chaos-w%d.%d", slot, r.gens[slot])
	r.gens[slot]++
	cfg, err := json.Marshal(workerConfig{
		URL: o.URL, Schema: o.Schema, ID: id, Slots: o.Slots, PoolConns: o.PoolConns, HogConns: o.HogConns,
		HangTimeout: o.HangTimeout, Lease: o.Lease, PollInterval: o.PollInterval, EffectOutsideTx: o.EffectOutsideTx,
		ClaimAhead: o.ClaimAhead,
	})
	if err != nil {
		return nil, err
	}
	p := &proc{id: id, started: time.Now()}
	p.Process, err = subproc.Start(context.Background(), o.Executable, &subproc.Options{
		Env: []string{workerEnv + "=" + string(cfg)},
		// The worker stops when its stdin closes, also when this process dies.
		Stdin: true,
		StdoutLine: func(line string) {
			if b, ok := strings.CutPrefix(line, statsPrefix); ok {
				var st poolStats
				if json.Unmarshal([]byte(b), &st) == nil {
					p.stats = &st
				}
			}
		},
		Stderr:       r.workerLog,
		StderrPrefix: "[" + id + "] ",
		OnExit: func(err error) {
			p.ended = time.Now()
			if !p.expected.Load() {
				r.violation("worker %s exited by itself: %v", id, err)
				o.Logf("chaos: worker %s exited by itself: %v", id, err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: failed to start worker %s: %w", id, err)
	}
	r.procs[slot] = p
	r.all = append(r.all, p)
	return p, nil
}

// kill9 kills the process with SIGKILL and waits for it.
func (p *proc) kill9() {
	p.expected.Store(true)
	p.Kill()
}

// stop asks the process to shut down gracefully (its stdin closes) and waits up to limit
// before killing it. It returns the exit error of a process that did not stop cleanly.
func (p *proc) stop(limit time.Duration) error {
	if p.gone() {
		return nil
	}
	p.expected.Store(true)
	_ = p.CloseStdin()
	return p.Wait(limit)
}

// stopAll stops every live worker gracefully, at once, recording those that do not stop
// cleanly. It is safe to call again.
func (r *runner) stopAll() {
	var wg sync.WaitGroup
	for _, p := range r.procs {
		if p == nil || p.gone() {
			continue
		}
		wg.Go(func() {
			if err := p.stop(30 * time.Second); err != nil {
				r.violation("worker %s did not shut down cleanly: %v", p.id, err)
			}
		})
	}
	wg.Wait()
}
