package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// Alternation: with -peers, a scenario the peers run too runs in rounds (-rounds, default
// 3), each round skiplock then every peer, each a fresh install, so that the systems are
// measured minutes apart at most and load from elsewhere on the machine falls on all of
// them alike. One pass per system proves nothing on a shared machine: the same harness can
// drain 2x faster or slower ten minutes later. Each system's figures are reported as the
// median of its rounds with their range, and each peer's ratio as the median of the
// per-round ratios (round i of skiplock against round i of the peer) with its range.

// spread is the median and range of one figure over the rounds.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// spreadOf returns the spread of v; ok is false when v is empty. The median of an even
// count is the mean of the middle two.
func spreadOf(v []float64) (s spread, ok bool) {
	if len(v) == 0 {
		return spread{}, false
	}
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return spread{Median: med, Min: v[0], Max: v[n-1], N: n}, true
}

// rounded is s with its values rounded to places decimals, for the JSON line.
func (s spread) rounded(places int) spread {
	return spread{benchresult.Round(s.Median, places), benchresult.Round(s.Min, places), benchresult.Round(s.Max, places), s.N}
}

// roundedPtr is rounded for an optional figure: nil stays nil.
func (s *spread) roundedPtr(places int) *spread {
	if s == nil {
		return nil
	}
	v := s.rounded(places)
	return &v
}

// roundResults are the results of one scenario step, per system, round by round (nil for a
// round in which the system failed).
type roundResults struct {
	step    string
	rounds  int
	systems []string // skiplock first, then the peers in -peers order
	results map[string][]*result
}

func newRoundResults(step string, rounds int, systems []string) *roundResults {
	rr := &roundResults{step: step, rounds: rounds, systems: systems, results: map[string][]*result{}}
	for _, s := range systems {
		rr.results[s] = make([]*result, rounds)
	}
	return rr
}

// set records system's result of round (1-based).
func (rr *roundResults) set(system string, round int, res *result) {
	if rs, ok := rr.results[system]; ok && round >= 1 && round <= len(rs) {
		rs[round-1] = res
	}
}

// medianRound returns the result of the round with the median jobs/s (of an even count,
// the lower middle), skipping failed rounds; nil when none succeeded.
func medianRound(rounds []*result) *result {
	var ok []*result
	for _, r := range rounds {
		if r != nil {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	slices.SortStableFunc(ok, func(a, b *result) int {
		switch x, y := a.JobsPerSec(), b.JobsPerSec(); {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return ok[(len(ok)-1)/2]
}

// systemSummary is one system's figures over the rounds.
type systemSummary struct {
	System     string  `json:"system"`
	JobsPerSec spread  `json:"jobs_per_sec"`
	P50ms      *spread `json:"p50_ms,omitempty"`
	P99ms      *spread `json:"p99_ms,omitempty"`
	// What a job cost the database server, in the drains (dbcost.go).
	CPUMicros *spread `json:"server_cpu_us_per_job,omitempty"`
	WALBytes  *spread `json:"server_wal_bytes_per_job,omitempty"`
}

// ratioSummary is one peer's ratio to skiplock over the rounds: skiplock's jobs/s over the
// peer's, or with a latency metric the peer's latency over skiplock's, so that above 1
// favours skiplock; a cost metric is skiplock's cost over the peer's (below 1 favours
// skiplock), as the cost targets are written.
type ratioSummary struct {
	Peer   string `json:"peer"`
	Metric string `json:"metric"` // "jobs_per_sec", "p50", "p99", "server_cpu_per_job" or "server_wal_per_job"
	spread
}

// costMetrics are the cost ratios of a drain, with how each reads a result's cost.
var costMetrics = []struct {
	name string
	of   func(*costPerJob) (float64, bool)
}{
	{"server_cpu_per_job", func(c *costPerJob) (float64, bool) { return c.cpuMicros, c.cpuKnown }},
	{"server_wal_per_job", func(c *costPerJob) (float64, bool) { return c.walBytes, true }},
}

// stepSummary is a step's alternation summary.
type stepSummary struct {
	Step    string          `json:"scenario"`
	Rounds  int             `json:"rounds"`
	Systems []systemSummary `json:"systems"`
	Ratios  []ratioSummary  `json:"ratios,omitempty"`
}

// summarize computes the summary of rr; metric is the scenario's peerLatency ("" for jobs/s).
func (rr *roundResults) summarize(metric string) stepSummary {
	sum := stepSummary{Step: rr.step, Rounds: rr.rounds}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, sys := range rr.systems {
		var jps, p50, p99, cpu, wal []float64
		for _, res := range rr.results[sys] {
			if res == nil {
				continue
			}
			jps = append(jps, res.JobsPerSec())
			if c := res.cost; c != nil {
				if c.cpuKnown {
					cpu = append(cpu, c.cpuMicros)
				}
				wal = append(wal, c.walBytes)
			}
			if res.Latency != nil {
				p50 = append(p50, ms(res.Latency.P50))
				p99 = append(p99, ms(res.Latency.P99))
			}
		}
		s, ok := spreadOf(jps)
		if !ok {
			continue // no round of this system succeeded
		}
		ss := systemSummary{System: sys, JobsPerSec: s}
		if s, ok := spreadOf(p50); ok {
			ss.P50ms = &s
		}
		if s, ok := spreadOf(p99); ok {
			ss.P99ms = &s
		}
		if s, ok := spreadOf(cpu); ok {
			ss.CPUMicros = &s
		}
		if s, ok := spreadOf(wal); ok {
			ss.WALBytes = &s
		}
		sum.Systems = append(sum.Systems, ss)
	}
	ours := rr.results["skiplock"]
	for _, sys := range rr.systems {
		if sys == "skiplock" {
			continue
		}
		var v []float64
		for i, theirs := range rr.results[sys] {
			if r, ok := roundRatio(metric, ours[i], theirs); ok {
				v = append(v, r)
			}
		}
		if s, ok := spreadOf(v); ok {
			m := metric
			if m == "" {
				m = "jobs_per_sec"
			}
			sum.Ratios = append(sum.Ratios, ratioSummary{Peer: sys, Metric: m, spread: s})
		}
		for _, cm := range costMetrics {
			var v []float64
			for i, theirs := range rr.results[sys] {
				if ours[i] == nil || theirs == nil || ours[i].cost == nil || theirs.cost == nil {
					continue
				}
				a, okA := cm.of(ours[i].cost)
				b, okB := cm.of(theirs.cost)
				if okA && okB && b > 0 {
					v = append(v, a/b)
				}
			}
			if s, ok := spreadOf(v); ok {
				sum.Ratios = append(sum.Ratios, ratioSummary{Peer: sys, Metric: cm.name, spread: s})
			}
		}
	}
	return sum
}

// roundRatio compares skiplock's result with a peer's of the same round: jobs/s, ours over
// theirs, or with metric "p50"/"p99" that latency, theirs over ours; ok is false when either
// is missing or a denominator is zero.
func roundRatio(metric string, ours, theirs *result) (float64, bool) {
	if ours == nil || theirs == nil {
		return 0, false
	}
	if metric == "" {
		if p := theirs.JobsPerSec(); p > 0 {
			return ours.JobsPerSec() / p, true
		}
		return 0, false
	}
	if ours.Latency == nil || theirs.Latency == nil {
		return 0, false
	}
	pick := func(s *benchresult.Stats) time.Duration {
		if metric == "p99" {
			return s.P99
		}
		return s.P50
	}
	if d := pick(ours.Latency); d > 0 {
		return float64(pick(theirs.Latency)) / float64(d), true
	}
	return 0, false
}

// summaryLine is a summary's -json line: {"system":"summary","scenario":…,"rounds":…,
// "systems":[…],"ratios":[…]}, after the step's result lines. Its "system" is "summary"
// so that a reader of the result lines can tell it apart and skip it.
func summaryLine(s stepSummary) ([]byte, error) {
	systems := make([]systemSummary, len(s.Systems))
	for i, ss := range s.Systems {
		systems[i] = systemSummary{System: ss.System, JobsPerSec: ss.JobsPerSec.rounded(1),
			P50ms: ss.P50ms.roundedPtr(3), P99ms: ss.P99ms.roundedPtr(3),
			CPUMicros: ss.CPUMicros.roundedPtr(1), WALBytes: ss.WALBytes.roundedPtr(0)}
	}
	ratios := make([]ratioSummary, len(s.Ratios))
	for i, r := range s.Ratios {
		ratios[i] = ratioSummary{Peer: r.Peer, Metric: r.Metric, spread: r.spread.rounded(3)}
	}
	b, err := json.Marshal(struct {
		System   string          `json:"system"`
		Scenario string          `json:"scenario"`
		Rounds   int             `json:"rounds"`
		Systems  []systemSummary `json:"systems"`
		Ratios   []ratioSummary  `json:"ratios"`
	}{"summary", s.Step, s.Rounds, systems, ratios})
	if err != nil {
		return nil, fmt.Errorf("failed to encode the summary of %s: %w", s.Step, err)
	}
	return append(b, '\n'), nil
}

// writeSummaries prints the alternation section of the table: per step and system the
// median (min–max) of jobs/s, p50 and p99, then each peer's ratio.
func writeSummaries(w io.Writer, sums []stepSummary, order []string) error {
	if len(sums) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "alternating rounds (each round: %s, a fresh install each; median (min-max) over the rounds):\n",
		strings.Join(order, ", then "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  scenario\tsystem\trounds\tjobs/s\tp50 ms\tp99 ms\tserver µs/job\tWAL B/job")
	for _, s := range sums {
		for _, ss := range s.Systems {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Step, ss.System, ss.JobsPerSec.N,
				fmtSpread(&ss.JobsPerSec, fmtWhole), fmtSpread(ss.P50ms, fmtMsFloat), fmtSpread(ss.P99ms, fmtMsFloat),
				fmtSpread(ss.CPUMicros, fmtWhole), fmtSpread(ss.WALBytes, fmtWhole))
		}
	}
	return tw.Flush()
}

// summaryRatioLines are the peers' ratios of the summaries, for the ratios section.
func summaryRatioLines(sums []stepSummary) []ratioLine {
	var out []ratioLine
	for _, s := range sums {
		for _, r := range s.Ratios {
			var name, means string
			switch r.Metric {
			case "jobs_per_sec":
				name = fmt.Sprintf("%s, skiplock / %s", s.Step, r.Peer)
				means = "jobs/s"
			case "server_cpu_per_job":
				name = fmt.Sprintf("%s server CPU per job, skiplock / %s", s.Step, r.Peer)
				means = "(<1: skiplock costs the server less CPU; deferred prune and vacuum included)"
			case "server_wal_per_job":
				name = fmt.Sprintf("%s WAL per job, skiplock / %s", s.Step, r.Peer)
				means = "(<1: skiplock writes less WAL; deferred prune and vacuum included)"
			default:
				name = fmt.Sprintf("%s %s, %s / skiplock", s.Step, r.Metric, r.Peer)
				means = "enqueue -> start " + r.Metric + " (>1: skiplock starts jobs sooner)"
			}
			if r.N > 1 {
				means = fmt.Sprintf("median of %d rounds, range %.2f-%.2fx; %s", r.N, r.Min, r.Max, means)
			}
			out = append(out, ratioLine{Name: name, Value: r.Median, Means: means})
		}
	}
	return out
}

// fmtSpread formats "median (min-max)", the median alone for one round, "" for nil.
func fmtSpread(s *spread, f func(float64) string) string {
	if s == nil {
		return ""
	}
	if s.N == 1 || s.Min == s.Max {
		return f(s.Median)
	}
	return f(s.Median) + " (" + f(s.Min) + "-" + f(s.Max) + ")"
}

// fmtWhole formats jobs/s, µs and bytes: no decimals.
func fmtWhole(v float64) string { return fmt.Sprintf("%.0f", v) }

// fmtMsFloat formats milliseconds as fmtMs does.
func fmtMsFloat(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmtMs(time.Duration(v * float64(time.Millisecond)))
}
