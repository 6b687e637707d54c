package ui

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sampleWindow is how far back the throughput chart looks.
const sampleWindow = time.Hour

// SampleIntervalDefault is the interval of [Handler.RunSampler] when given 0.
const SampleIntervalDefault = 15 * time.Second

// sample is one reading of jobs_metrics' totals row.
type sample struct {
	at      time.Time
	created int64 // jobs_created_total
	live    int64 // queued + running jobs
}

// sampler keeps the last hour of samples, oldest first.
type sampler struct {
	mu      sync.Mutex
	samples []sample
}

func newSampler() *sampler { return &sampler{} }

// add records s, dropping samples older than the window and any taken less than a second
// after the previous one (two requests at once).
func (s *sampler) add(x sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.samples); n > 0 && x.at.Sub(s.samples[n-1].at) < time.Second {
		return
	}
	s.samples = append(s.samples, x)
	cut := 0
	for cut < len(s.samples) && x.at.Sub(s.samples[cut].at) > sampleWindow {
		cut++
	}
	s.samples = append(s.samples[:0], s.samples[cut:]...)
}

func (s *sampler) snapshot() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}

// throughputPoint is the rate between two consecutive samples, per minute.
type throughputPoint struct {
	at       time.Time
	created  float64
	finished float64
}

func rates(samples []sample) []throughputPoint {
	var out []throughputPoint
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		minutes := b.at.Sub(a.at).Minutes()
		if minutes <= 0 {
			continue
		}
		created := float64(b.created - a.created)
		// Jobs leave the live set by finishing; a retry brings one back (negative finishing).
		finished := created - float64(b.live-a.live)
		out = append(out, throughputPoint{
			at:       b.at,
			created:  math.Max(created, 0) / minutes,
			finished: math.Max(finished, 0) / minutes,
		})
	}
	return out
}

// takeSample reads jobs_metrics' totals row and records it.
func (h *Handler) takeSample(ctx context.Context) error {
	_, total, err := h.admin.Metrics(ctx)
	if err != nil {
		return fmt.Errorf("failed to sample jobs_metrics: %w", err)
	}
	h.sampler.add(sample{at: time.Now(), created: deref(total.JobsCreatedTotal), live: total.Ready + total.Scheduled + total.Running})
	return nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// RunSampler samples jobs_metrics every interval (0: [SampleIntervalDefault]) for the
// overview's throughput chart, until ctx is done; it returns ctx's error. Without it the
// chart has only the samples that overview requests take. A failed sample is logged and
// skipped.
func (h *Handler) RunSampler(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = SampleIntervalDefault
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := h.takeSample(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("ui: throughput sample failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// throughputChart draws the rates as an inline SVG: created (blue) and finished (green) jobs
// per minute against time. The time axis spans the last hour, or less while the process has
// sampled for less (at least 10 seconds), so a fresh process shows what it has.
func throughputChart(points []throughputPoint, now time.Time) string {
	const w, hgt, left, bottom, top = 640.0, 160.0, 64.0, 20.0, 10.0
	window := 10 * time.Second
	if len(points) > 0 {
		window = min(sampleWindow, max(window, now.Sub(points[0].at).Round(time.Second)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="jobs created and finished per minute">`, w, hgt, w, hgt)
	maxRate := 1.0
	for _, p := range points {
		maxRate = math.Max(maxRate, math.Max(p.created, p.finished))
	}
	plotW, plotH := w-left-12, hgt-bottom-top
	x := func(t time.Time) float64 {
		return left + plotW*(1-now.Sub(t).Seconds()/window.Seconds())
	}
	y := func(v float64) float64 { return top + plotH*(1-v/maxRate) }
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fafafa" stroke="#ccc"/>`, left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="10" text-anchor="end">%s</text>`, left-4, top+8, formatRate(maxRate))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="10" text-anchor="end">0</text>`, left-4, top+plotH)
	for i := 4; i >= 0; i-- {
		ago := window * time.Duration(i) / 4
		label := "now"
		if i > 0 {
			label = "-" + formatDuration(ago.Round(time.Second))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" text-anchor="middle">%s</text>`, x(now.Add(-ago)), hgt-5, label)
	}
	line := func(color string, v func(throughputPoint) float64) {
		if len(points) == 0 {
			return
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="`, color)
		for _, p := range points {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(p.at), y(v(p)))
		}
		b.WriteString(`"/>`)
	}
	line("#2a6fdb", func(p throughputPoint) float64 { return p.created })
	line("#2e9e48", func(p throughputPoint) float64 { return p.finished })
	if len(points) == 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="12" text-anchor="middle" fill="#888">collecting samples…</text>`, left+plotW/2, top+plotH/2)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func formatRate(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f/min", v)
	}
	return fmt.Sprintf("%.1f/min", v)
}

// throughputSVG serves the chart on its own, for embedding elsewhere.
func (h *Handler) throughputSVG(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(throughputChart(rates(h.sampler.snapshot()), time.Now())))
}
