// Package benchresult is the result line of cmd/bench and of its Go peer harnesses: what a
// scenario measured, its latency percentiles and the JSON line of `cmd/bench -json`, which
// the harnesses print and cmd/bench reads back. Keeping one copy keeps the format one.
package benchresult

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Field is one extra key of a JSON result line. Extras keep the order they are added in,
// so lines read the same way run after run.
type Field struct {
	Key   string
	Value any
}

// Result is what one scenario measured, as far as its JSON line tells.
type Result struct {
	Scenario string
	Jobs     int64   // jobs inserted (insert_*) or completed (the others)
	Seconds  float64 // timed part only

	// Latency, when the scenario measures one; nil otherwise.
	Latency *Stats
	// LatencyPrefix goes before the latency fields of the JSON line: "" gives p50_ms…, the
	// enqueue -> start latency; "insert_" gives insert_p50_ms…, the insert call's.
	LatencyPrefix string

	Extra []Field
}

// JobsPerSec is Jobs over Seconds, or 0 when no time was measured.
func (r *Result) JobsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Jobs) / r.Seconds
}

// SetLatency sets Latency to the summary of d, or to nil when d is empty.
func (r *Result) SetLatency(d []time.Duration) {
	r.Latency = nil
	if len(d) > 0 {
		s := Summarize(d)
		r.Latency = &s
	}
}

// Add appends an extra field to the JSON line.
func (r *Result) Add(key string, value any) { r.Extra = append(r.Extra, Field{key, value}) }

// JSONLine renders r as one JSON object, newline-terminated: system, version, scenario,
// jobs, seconds, jobs_per_sec, then p50_ms, p95_ms, p99_ms, max_ms, min_ms, mean_ms and
// latency_samples when a latency was measured (with LatencyPrefix before each), then the
// scenario's extras, then common (settings shared by every line). A key already written
// is skipped, so a scenario's own value wins over a common one.
func (r *Result) JSONLine(system, version string, common []Field) ([]byte, error) {
	fields := []Field{
		{"system", system},
		{"version", version},
		{"scenario", r.Scenario},
		{"jobs", r.Jobs},
		{"seconds", Round(r.Seconds, 4)},
		{"jobs_per_sec", Round(r.JobsPerSec(), 1)},
	}
	if l := r.Latency; l != nil {
		p := r.LatencyPrefix
		fields = append(fields,
			Field{p + "p50_ms", MS(l.P50)}, Field{p + "p95_ms", MS(l.P95)}, Field{p + "p99_ms", MS(l.P99)},
			Field{p + "max_ms", MS(l.Max)}, Field{p + "min_ms", MS(l.Min)}, Field{p + "mean_ms", MS(l.Avg)},
			Field{p + "latency_samples", l.N})
	}
	fields = append(fields, r.Extra...)
	fields = append(fields, common...)

	var buf bytes.Buffer
	buf.WriteByte('{')
	seen := make(map[string]bool, len(fields))
	first := true
	for _, f := range fields {
		if seen[f.Key] {
			continue
		}
		seen[f.Key] = true
		k, err := marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("failed to encode field %q: %w", f.Key, err)
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping, so "->" stays readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
