package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// field is one extra key of a JSON result line. Extras keep the order they are added in,
// so lines read the same way run after run.
type field struct {
	Key   string
	Value any
}

// result is what one scenario measured.
type result struct {
	Scenario string
	Jobs     int64   // jobs inserted (insert_*) or completed (the others)
	Seconds  float64 // timed part only

	// Latency, when the scenario measures one (set with setLatency).
	Latency *latencyStats
	// LatencyLabel names what Latency measures, for the table (e.g. "enqueue->start").
	LatencyLabel string
	// LatencyPrefix goes before the latency fields of the JSON line: "" gives p50_ms…, the
	// peers' enqueue -> start latency; "insert_" gives insert_p50_ms…, their insert call.
	LatencyPrefix string

	Extra []field
	Notes []string // short remarks for the human table

	// For -plot: jobs done so far, sampled while the scenario ran, and the raw latencies.
	Series    []sample
	Latencies []time.Duration
}

func (r *result) jobsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Jobs) / r.Seconds
}

func (r *result) add(key string, value any) { r.Extra = append(r.Extra, field{key, value}) }

func (r *result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// setLatency stores the distribution of d; label says what was measured.
func (r *result) setLatency(label string, d []time.Duration) {
	r.LatencyLabel = label
	r.Latencies = d
	if len(d) > 0 {
		s := summarize(d)
		r.Latency = &s
	}
}

// latencyStats summarises a latency sample. Percentiles are nearest-rank, as the River
// peer computes them: the smallest value with at least p% of the sample at or below it.
type latencyStats struct {
	N                            int
	Min, P50, P95, P99, Max, Avg time.Duration
}

func summarize(d []time.Duration) latencyStats {
	if len(d) == 0 {
		return latencyStats{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return latencyStats{
		N:   len(s),
		Min: s[0],
		P50: percentile(s, 50),
		P95: percentile(s, 95),
		P99: percentile(s, 99),
		Max: s[len(s)-1],
		Avg: sum / time.Duration(len(s)),
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted, which must
// be sorted ascending and non-empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func round(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}

// ms converts d to milliseconds rounded to microseconds, the unit of the peers' *_ms fields.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

// jsonLine renders r as one JSON object in the peers' format: system, version, scenario,
// jobs, seconds, jobs_per_sec, then p50_ms/p95_ms/p99_ms/max_ms when a latency was
// measured (insert_p50_ms… for the insert call of insert_single), then the scenario's extras, then common (settings shared by every line).
func jsonLine(system, version string, r *result, common []field) ([]byte, error) {
	fields := []field{
		{"system", system},
		{"version", version},
		{"scenario", r.Scenario},
		{"jobs", r.Jobs},
		{"seconds", round(r.Seconds, 4)},
		{"jobs_per_sec", round(r.jobsPerSec(), 1)},
	}
	if l := r.Latency; l != nil {
		p := r.LatencyPrefix
		fields = append(fields,
			field{p + "p50_ms", ms(l.P50)}, field{p + "p95_ms", ms(l.P95)}, field{p + "p99_ms", ms(l.P99)},
			field{p + "max_ms", ms(l.Max)}, field{p + "min_ms", ms(l.Min)}, field{p + "mean_ms", ms(l.Avg)},
			field{p + "latency_samples", l.N})
	}
	fields = append(fields, r.Extra...)
	fields = append(fields, common...)

	var buf bytes.Buffer
	buf.WriteByte('{')
	seen := make(map[string]bool, len(fields))
	first := true
	for _, f := range fields {
		if seen[f.Key] { // a scenario's own value wins over a common one
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

// ratioLine is one line of the ratios section: a measured ratio and how to read it.
type ratioLine struct {
	Name  string
	Value float64
	Means string
}

// writeTable prints the human-readable report: results, then ratios.
func writeTable(w io.Writer, results []*result, ratios []ratioLine) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tjobs\tseconds\tjobs/s\tp50 ms\tp95 ms\tp99 ms\tmax ms\t\tnotes")
	for _, r := range results {
		p := [4]string{"", "", "", ""}
		if l := r.Latency; l != nil {
			p = [4]string{fmtMs(l.P50), fmtMs(l.P95), fmtMs(l.P99), fmtMs(l.Max)}
		}
		notes := r.Notes
		if r.LatencyLabel != "" && r.Latency != nil {
			notes = append([]string{"latency: " + r.LatencyLabel}, notes...)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t\t%s\n",
			r.Scenario, r.Jobs, r.Seconds, r.jobsPerSec(), p[0], p[1], p[2], p[3], strings.Join(notes, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(ratios) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ratios (measured side by side in this run):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range ratios {
		fmt.Fprintf(tw, "  %s\t%.2fx\t%s\n", r.Name, r.Value, r.Means)
	}
	return tw.Flush()
}

// fmtMs formats a latency for the table; zero, which peers use for a value they do not
// report, is left blank.
func fmtMs(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case d == 0:
		return ""
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}
