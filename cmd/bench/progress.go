package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sample is the number of jobs a scenario had done at a moment of its run.
type sample struct {
	At   time.Duration // since the timed part began
	Done int64
}

// sampleInterval is how often a running scenario is sampled, for the progress bar and
// the throughput curves of -plot.
const sampleInterval = 200 * time.Millisecond

// progress counts what a scenario has done, samples it, and draws a bar on a terminal.
// Done is updated by the scenario (Add or Set); the sampler only reads it.
type progress struct {
	name  string
	total int64         // jobs to do; 0 for a timed scenario
	span  time.Duration // length of a timed scenario; 0 for a counted one
	out   io.Writer     // nil: no bar
	done  atomic.Int64

	mu      sync.Mutex
	start   time.Time
	samples []sample
	stop    chan struct{}
	stopped chan struct{}
}

// newProgress returns a progress for a scenario of total jobs (or span long, when total
// is 0). The bar is drawn on stderr only when stderr is a terminal and show is set.
func newProgress(name string, total int64, span time.Duration, show bool) *progress {
	p := &progress{name: name, total: total, span: span}
	if show && isTerminal(os.Stderr) {
		p.out = os.Stderr
	}
	return p
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) Add(n int64) { p.done.Add(n) }
func (p *progress) Set(n int64) { p.done.Store(n) }

// Begin marks the start of the timed part and starts sampling.
func (p *progress) Begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		return
	}
	p.start = time.Now()
	p.samples = []sample{{0, p.done.Load()}}
	p.stop = make(chan struct{})
	p.stopped = make(chan struct{})
	go p.loop()
}

func (p *progress) loop() {
	defer close(p.stopped)
	t := time.NewTicker(sampleInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.record(now)
		}
	}
}

func (p *progress) record(now time.Time) {
	p.mu.Lock()
	s := sample{now.Sub(p.start), p.done.Load()}
	p.samples = append(p.samples, s)
	p.mu.Unlock()
	if p.out != nil {
		fmt.Fprintf(p.out, "\r%s", p.bar(s))
	}
}

// End stops sampling, records the final sample and clears the bar. It returns the
// samples. Calling End twice, or without Begin, is harmless.
func (p *progress) End() []sample {
	p.mu.Lock()
	stop := p.stop
	p.mu.Unlock()
	if stop == nil {
		return nil
	}
	select {
	case <-stop:
	default:
		close(stop)
		<-p.stopped
		p.record(time.Now())
		if p.out != nil {
			fmt.Fprintf(p.out, "\r%s\r", strings.Repeat(" ", 79))
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sample(nil), p.samples...)
}

// bar renders one status line, e.g.
// "work_drain   [########............]  41%  20500/50000  9850 jobs/s".
func (p *progress) bar(s sample) string {
	const width = 24
	frac := 0.0
	switch {
	case p.total > 0:
		frac = float64(s.Done) / float64(p.total)
	case p.span > 0:
		frac = float64(s.At) / float64(p.span)
	}
	frac = max(0, min(frac, 1))
	filled := int(frac * width)
	rate := 0.0
	if sec := s.At.Seconds(); sec > 0 {
		rate = float64(s.Done) / sec
	}
	count := fmt.Sprintf("%d", s.Done)
	if p.total > 0 {
		count = fmt.Sprintf("%d/%d", s.Done, p.total)
	}
	return fmt.Sprintf("%-13s [%s%s] %3.0f%%  %s  %.0f jobs/s  %.1fs",
		p.name, strings.Repeat("#", filled), strings.Repeat(".", width-filled), frac*100, count, rate, s.At.Seconds())
}

// rates turns cumulative samples into throughput points (jobs/s over each interval),
// placed at the interval's end. A last interval shorter than half the sample interval
// (the scenario ended just after a tick) is left out: its rate is mostly noise.
func rates(samples []sample) []point {
	var pts []point
	for i := 1; i < len(samples); i++ {
		dt := (samples[i].At - samples[i-1].At).Seconds()
		if dt <= 0 || (i == len(samples)-1 && i > 1 && dt < sampleInterval.Seconds()/2) {
			continue
		}
		pts = append(pts, point{samples[i].At.Seconds(), float64(samples[i].Done-samples[i-1].Done) / dt})
	}
	return pts
}

// point is an (x, y) pair of a plotted curve.
type point struct{ X, Y float64 }
