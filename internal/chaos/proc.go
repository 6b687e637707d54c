package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// proc is one worker process.
type proc struct {
	id      string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	started time.Time
	exited  chan struct{} // closed once the process has been waited for
	err     error         // its exit error; set before exited is closed
	ended   time.Time     // when it was found dead; set before exited is closed
	stats   *poolStats    // reported by a worker that exited cleanly; set before exited is closed

	expected atomic.Bool // we killed or stopped it
}

// gone reports whether the process has exited.
func (p *proc) gone() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

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
	})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Executable)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(cfg))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: failed to start worker %s (%s): %w", id, o.Executable, err)
	}
	p := &proc{id: id, cmd: cmd, stdin: stdin, started: time.Now(), exited: make(chan struct{})}
	logw := r.workerLog
	statsRead := make(chan struct{})
	go func() {
		defer close(statsRead)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if b, ok := strings.CutPrefix(sc.Text(), statsPrefix); ok {
				var st poolStats
				if json.Unmarshal([]byte(b), &st) == nil {
					p.stats = &st
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			fmt.Fprintf(logw, "[%s] %s\n", id, sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr) // a line too long for the scanner
		<-statsRead
		p.err = cmd.Wait()
		p.ended = time.Now()
		close(p.exited)
		if !p.expected.Load() {
			r.violation("worker %s exited by itself: %v", id, p.err)
			o.Logf("chaos: worker %s exited by itself: %v", id, p.err)
		}
	}()
	r.procs[slot] = p
	r.all = append(r.all, p)
	return p, nil
}

// kill9 kills the process with SIGKILL and waits for it.
func (p *proc) kill9() {
	p.expected.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop asks the process to shut down gracefully (its stdin closes) and waits up to limit
// before killing it. It returns the exit error of a process that did not stop cleanly.
func (p *proc) stop(limit time.Duration) error {
	if p.gone() {
		return nil
	}
	p.expected.Store(true)
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("did not stop within %s of being asked", limit)
	}
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
