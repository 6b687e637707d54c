package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// result is what one scenario measured: its JSON line (benchresult.Result) and what the
// table and -plot show besides.
type result struct {
	benchresult.Result

	// LatencyLabel names what Latency measures, for the table (e.g. "enqueue->start").
	LatencyLabel string
	Notes        []string    // short remarks for the human table
	Round        int         // the round (1-based) when the scenario ran in rounds, else 0
	cost         *costPerJob // the drains': what a job cost the server (dbcost.go); nil elsewhere

	// For -plot: jobs done so far, sampled while the scenario ran, and the raw latencies.
	Series    []sample
	Latencies []time.Duration
}

func (r *result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// setLatency stores the distribution of d; label says what was measured.
func (r *result) setLatency(label string, d []time.Duration) {
	r.LatencyLabel = label
	r.Latencies = d
	r.SetLatency(d)
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
			r.Scenario, r.Jobs, r.Seconds, r.JobsPerSec(), p[0], p[1], p[2], p[3], strings.Join(notes, "; "))
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
