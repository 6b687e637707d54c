package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// field is one key of a JSON line; lines keep their fields in the order added.
type field struct {
	key   string
	value any
}

// result is what one scenario measured.
type result struct {
	scenario string
	jobs     int64
	seconds  float64
	// latency, when measured; latencyPrefix "insert_" marks the insert call's latency
	// (insert_p50_ms…), "" the enqueue -> start latency (p50_ms…), as in cmd/bench.
	latency       []time.Duration
	latencyPrefix string
	extra         []field
}

func (r *result) add(key string, value any) { r.extra = append(r.extra, field{key, value}) }

func (r *result) jobsPerSec() float64 {
	if r.seconds <= 0 {
		return 0
	}
	return float64(r.jobs) / r.seconds
}

// jsonLine renders r in cmd/bench's -json format: system, version, scenario, jobs, seconds,
// jobs_per_sec, the latency percentiles, the scenario's extras, then common.
func (r *result) jsonLine(version string, common []field) ([]byte, error) {
	fields := []field{
		{"system", "river"}, {"version", version}, {"scenario", r.scenario}, {"jobs", r.jobs},
		{"seconds", round(r.seconds, 4)}, {"jobs_per_sec", round(r.jobsPerSec(), 1)},
	}
	if len(r.latency) > 0 {
		s := slices.Clone(r.latency)
		slices.Sort(s)
		var sum time.Duration
		for _, d := range s {
			sum += d
		}
		p := r.latencyPrefix
		fields = append(fields,
			field{p + "p50_ms", ms(percentile(s, 50))}, field{p + "p95_ms", ms(percentile(s, 95))},
			field{p + "p99_ms", ms(percentile(s, 99))}, field{p + "max_ms", ms(s[len(s)-1])},
			field{p + "min_ms", ms(s[0])}, field{p + "mean_ms", ms(sum / time.Duration(len(s)))},
			field{p + "latency_samples", len(s)})
	}
	fields = append(append(fields, r.extra...), common...)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range fields {
		k, _ := marshal(f.key)
		v, err := marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("failed to encode field %q: %w", f.key, err)
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping, so "->" stays readable, as in cmd/bench.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// percentile is the nearest-rank p-th percentile of sorted, as cmd/bench computes it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func round(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}

// ms is d in milliseconds, rounded to microseconds.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

// latencyRecorder pairs each job's insert commit with its handler start, by job id.
type latencyRecorder struct {
	mu        sync.Mutex
	committed map[int64]time.Time
	started   map[int64]time.Time
}

func newLatencyRecorder() *latencyRecorder {
	return &latencyRecorder{committed: map[int64]time.Time{}, started: map[int64]time.Time{}}
}

func (l *latencyRecorder) commit(id int64, at time.Time) {
	l.mu.Lock()
	l.committed[id] = at
	l.mu.Unlock()
}

func (l *latencyRecorder) start(id int64, at time.Time) {
	l.mu.Lock()
	if _, ok := l.started[id]; !ok {
		l.started[id] = at
	}
	l.mu.Unlock()
}

// latencies returns start minus commit of every job that has both and started no later
// than until (zero: whenever). A job can start before its inserter sees the commit
// acknowledged; such values count in negative and are clamped to zero.
func (l *latencyRecorder) latencies(until time.Time) (d []time.Duration, negative int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, c := range l.committed {
		s, ok := l.started[id]
		if !ok || (!until.IsZero() && s.After(until)) {
			continue
		}
		v := s.Sub(c)
		if v < 0 {
			negative++
			v = 0
		}
		d = append(d, v)
	}
	return d, negative
}
