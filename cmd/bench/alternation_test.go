package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// TestAlternateRunsTheSystemsRoundByRound: A B C A B C A B C, not A A A B B B.
func TestAlternateRunsTheSystemsRoundByRound(t *testing.T) {
	t.Parallel()
	var got []string
	err := alternate(3, []string{"river", "graphile-worker"}, func(round int, system string) error {
		got = append(got, system+string(rune('0'+round)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"skiplock1", "river1", "graphile-worker1", "skiplock2", "river2", "graphile-worker2",
		"skiplock3", "river3", "graphile-worker3"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}

	boom := errors.New("boom")
	calls := 0
	if err := alternate(3, []string{"river"}, func(round int, system string) error {
		calls++
		if round == 2 && system == "skiplock" {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) || calls != 3 {
		t.Errorf("err %v after %d calls, want boom after 3", err, calls)
	}
}

func TestSpreadOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []float64
		want spread
	}{
		{[]float64{3, 1, 2}, spread{2, 1, 3, 3}},
		{[]float64{4, 1, 3, 2}, spread{2.5, 1, 4, 4}},
		{[]float64{7}, spread{7, 7, 7, 1}},
	} {
		got, ok := spreadOf(c.in)
		if !ok || got != c.want {
			t.Errorf("spreadOf(%v) = %+v, %v; want %+v", c.in, got, ok, c.want)
		}
	}
	if _, ok := spreadOf(nil); ok {
		t.Error("spreadOf(nil) is ok")
	}
}

// TestSummarizePairsRounds: a peer's ratio is the median of the per-round ratios (round i
// against round i, not medians against medians), a failed round drops out of both its
// system's figures and the ratios, and the latency scenarios compare the table's percentile.
func TestSummarizePairsRounds(t *testing.T) {
	t.Parallel()
	res := func(jps float64, p50, p99 time.Duration) *result {
		r := &result{Result: benchresult.Result{Scenario: "x", Jobs: int64(jps), Seconds: 1}}
		if p50 > 0 {
			r.Latency = &benchresult.Stats{P50: p50, P99: p99}
		}
		return r
	}
	rr := newRoundResults("work_drain", 3, []string{"skiplock", "river", "graphile-worker"})
	rr.set("skiplock", 1, res(1000, 0, 0))
	rr.set("skiplock", 2, res(3000, 0, 0))
	rr.set("skiplock", 3, res(2000, 0, 0))
	rr.set("river", 1, res(1000, 0, 0)) // 1.0x
	rr.set("river", 2, res(1000, 0, 0)) // 3.0x
	rr.set("river", 3, res(500, 0, 0))  // 4.0x
	rr.set("graphile-worker", 2, res(1500, 0, 0))
	rr.set("nobody", 1, res(1, 0, 0)) // not a system of rr: ignored
	sum := rr.summarize("")
	if len(sum.Systems) != 3 || sum.Systems[0].JobsPerSec != (spread{2000, 1000, 3000, 3}) || sum.Systems[0].P50ms != nil {
		t.Errorf("systems %+v", sum.Systems)
	}
	if sum.Systems[2].JobsPerSec != (spread{1500, 1500, 1500, 1}) {
		t.Errorf("graphile-worker %+v", sum.Systems[2])
	}
	// Medians against medians would give 2000/1000 = 2.0x; round by round 1, 3, 4 -> 3.0x.
	want := []ratioSummary{{"river", "jobs_per_sec", spread{3, 1, 4, 3}}, {"graphile-worker", "jobs_per_sec", spread{2, 2, 2, 1}}}
	if !slices.Equal(sum.Ratios, want) {
		t.Errorf("ratios %+v, want %+v", sum.Ratios, want)
	}

	lat := newRoundResults("steady_rate", 2, []string{"skiplock", "river"})
	lat.set("skiplock", 1, res(500, time.Millisecond, 4*time.Millisecond))
	lat.set("skiplock", 2, res(500, time.Millisecond, 2*time.Millisecond))
	lat.set("river", 1, res(480, 2*time.Millisecond, 8*time.Millisecond))
	lat.set("river", 2, res(480, 3*time.Millisecond, 8*time.Millisecond))
	ls := lat.summarize("p99")
	if got := ls.Ratios[0]; got.Metric != "p99" || got.spread != (spread{3, 2, 4, 2}) {
		t.Errorf("p99 ratio %+v, want 3 (2-4)", got)
	}
	if p := ls.Systems[0].P99ms; p == nil || *p != (spread{3, 2, 4, 2}) {
		t.Errorf("skiplock p99 %+v", p)
	}
	if got := lat.summarize("p50").Ratios[0]; got.spread != (spread{2.5, 2, 3, 2}) {
		t.Errorf("p50 ratio %+v", got)
	}
}

func TestSummaryLine(t *testing.T) {
	t.Parallel()
	p := spread{1.23456, 1, 2, 3}
	line, err := summaryLine(stepSummary{Step: "latency", Rounds: 3,
		Systems: []systemSummary{{System: "skiplock", JobsPerSec: spread{100.04, 99, 101, 3}, P50ms: &p}},
		Ratios:  []ratioSummary{{"river", "p50", spread{1.23456, 1, 2, 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"system":"summary","scenario":"latency","rounds":3,` +
		`"systems":[{"system":"skiplock","jobs_per_sec":{"median":100,"min":99,"max":101,"n":3},"p50_ms":{"median":1.235,"min":1,"max":2,"n":3}}],` +
		`"ratios":[{"peer":"river","metric":"p50","median":1.235,"min":1,"max":2,"n":3}]}` + "\n"
	if string(line) != want {
		t.Errorf("line\n%s\nwant\n%s", line, want)
	}
	if !json.Valid(line) {
		t.Error("not JSON")
	}
	// A reader of result lines sees a line of system "summary" and can skip it.
	pl, err := parsePeerLine([]byte(strings.TrimSpace(string(line))))
	if err != nil || pl.System != "summary" {
		t.Errorf("parsed as %+v, %v", pl, err)
	}
}

func TestWithRound(t *testing.T) {
	t.Parallel()
	got := withRound([]byte(`{"system":"river","scenario":"work_drain","jobs":1}`), 2)
	if want := `{"system":"river","scenario":"work_drain","jobs":1,"round":2}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestRounds(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) *config {
		t.Helper()
		cfg, err := parseFlags(args, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	drain, naive := scenarioNamed("work_drain"), scenarioNamed("naive")

	t.Run("WithoutPeersOnePass", func(t *testing.T) {
		t.Parallel()
		cfg := parse()
		if cfg.roundsFor(drain) != 1 || cfg.jobs != 50000 || cfg.steadyDuration != 15*time.Second || cfg.latencyJobs != 500 {
			t.Errorf("rounds %d, jobs %d, steady %s, latency jobs %d", cfg.roundsFor(drain), cfg.jobs, cfg.steadyDuration, cfg.latencyJobs)
		}
	})
	t.Run("WithoutPeersRoundsGiven", func(t *testing.T) {
		t.Parallel()
		cfg := parse("-rounds", "2")
		if cfg.roundsFor(drain) != 2 || cfg.roundsFor(naive) != 2 {
			t.Errorf("rounds %d and %d, want 2", cfg.roundsFor(drain), cfg.roundsFor(naive))
		}
	})
	t.Run("PeersAlternateTheirScenariosOnly", func(t *testing.T) {
		t.Parallel()
		cfg := parse("-peers", "river")
		if cfg.roundsFor(drain) != 3 || cfg.roundsFor(naive) != 1 {
			t.Errorf("rounds %d and %d, want 3 and 1", cfg.roundsFor(drain), cfg.roundsFor(naive))
		}
		if cfg.jobs != peerRunJobs || cfg.steadyDuration != peerRunSteadyDuration || cfg.latencyJobs != peerRunLatencyJobs {
			t.Errorf("peer-run defaults not applied: jobs %d, steady %s, latency jobs %d", cfg.jobs, cfg.steadyDuration, cfg.latencyJobs)
		}
	})
	t.Run("FlagsGivenWinOverPeerRunDefaults", func(t *testing.T) {
		t.Parallel()
		cfg := parse("-peers", "river", "-jobs", "50000", "-steady-duration", "15s", "-latency-jobs", "500", "-rounds", "5")
		if cfg.jobs != 50000 || cfg.steadyDuration != 15*time.Second || cfg.latencyJobs != 500 || cfg.roundsFor(drain) != 5 {
			t.Errorf("jobs %d, steady %s, latency jobs %d, rounds %d", cfg.jobs, cfg.steadyDuration, cfg.latencyJobs, cfg.roundsFor(drain))
		}
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-rounds", "0"}, "-rounds must be between 1 and 100"},
		{[]string{"-rate", "-5"}, "-rate cannot be negative"},
	} {
		if _, err := parseFlags(c.args, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
	}
}

// TestArrivalRate: -rate wins; else half the lower capacity, from the summaries (medians)
// before the latest single results; else the fixed default.
func TestArrivalRate(t *testing.T) {
	t.Parallel()
	one := func(step string, jps float64) *result {
		return &result{Result: benchresult.Result{Scenario: step, Jobs: int64(jps), Seconds: 1}}
	}
	cfg := &config{}
	if got := cfg.arrivalRate(nil, map[string]*result{}); got != defaultArrivalRate {
		t.Errorf("nothing ran: %v", got)
	}
	byName := map[string]*result{"work_drain": one("work_drain", 12000), "insert_single": one("insert_single", 3000)}
	if got := cfg.arrivalRate(nil, byName); got != 1500 {
		t.Errorf("single pass: %v, want 1500", got)
	}
	sums := []stepSummary{{Step: "insert_single", Systems: []systemSummary{{System: "skiplock", JobsPerSec: spread{Median: 5000}}}}}
	if got := cfg.arrivalRate(sums, byName); got != 2500 {
		t.Errorf("with the insert_single median 5000: %v, want 2500", got)
	}
	if got := cfg.arrivalRate(nil, map[string]*result{"work_drain": one("work_drain", 800)}); got != 400 {
		t.Errorf("work_drain only: %v, want 400", got)
	}
	cfg.rate = 750
	if got := cfg.arrivalRate(sums, byName); got != 750 {
		t.Errorf("-rate: %v", got)
	}
}

// TestMedianRound: the baseline of later ratios is the median round, not the last.
func TestMedianRound(t *testing.T) {
	t.Parallel()
	r := func(jps int64) *result { return &result{Result: benchresult.Result{Jobs: jps, Seconds: 1}} }
	a, b, c, d := r(300), r(100), r(200), r(400)
	if got := medianRound([]*result{a, b, c}); got != c {
		t.Errorf("median of 300, 100, 200 is %v", got.JobsPerSec())
	}
	if got := medianRound([]*result{a, nil, d, b, c}); got != c {
		t.Errorf("median of 300, 400, 100, 200 (one round failed) is %v, want the lower middle 200", got.JobsPerSec())
	}
	if medianRound([]*result{nil}) != nil {
		t.Error("median of no round")
	}
}

// TestRatiosToARoundedStepUseItsMedianRound: bloat / work_drain against work_drain's median
// round, the same on the JSON line, in the notes and in the ratios section.
func TestRatiosToARoundedStepUseItsMedianRound(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"-scenarios", "work_drain,bloat"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := func(step string, jps int64) *result {
		return &result{Result: benchresult.Result{Scenario: step, Jobs: jps, Seconds: 1}}
	}
	rounds := []*result{r("work_drain", 3000), r("work_drain", 2000), r("work_drain", 1000)} // median 2000, last 1000
	results := slices.Clone(rounds)
	byName := map[string]*result{"work_drain": medianRound(rounds)} // as run does after the rounds
	bloat := r("bloat", 4000)
	results = append(results, bloat)
	byName["bloat"] = bloat
	addRatioFields(scenarioNamed("bloat"), bloat, byName)
	if !slices.Contains(bloat.Notes, "2.00x work_drain") {
		t.Errorf("notes %q, want 2.00x work_drain", bloat.Notes)
	}
	lines := ratioLines(cfg, results, byName)
	if len(lines) != 1 || lines[0].Name != "bloat / work_drain" || lines[0].Value != 2 {
		t.Errorf("ratio lines %+v, want bloat / work_drain 2.00x", lines)
	}
}

// TestSummarizeCosts: a drain's cost per job is summarized per system, and its ratios are
// skiplock's cost over the peer's, round by round; a peer without a CPU figure (a
// DATABASE_URL server) gets a WAL ratio only.
func TestSummarizeCosts(t *testing.T) {
	t.Parallel()
	res := func(cpu, wal float64, cpuKnown bool) *result {
		return &result{Result: benchresult.Result{Scenario: "work_drain", Jobs: 1000, Seconds: 1},
			cost: &costPerJob{cpuMicros: cpu, cpuKnown: cpuKnown, walBytes: wal}}
	}
	rr := newRoundResults("work_drain", 2, []string{"skiplock", "river", "graphile-worker"})
	rr.set("skiplock", 1, res(40, 600, true))
	rr.set("skiplock", 2, res(30, 400, true))
	rr.set("river", 1, res(80, 1200, true))  // 0.5x, 0.5x
	rr.set("river", 2, res(100, 1600, true)) // 0.3x, 0.25x
	rr.set("graphile-worker", 1, res(0, 800, false))
	sum := rr.summarize("")
	if c := sum.Systems[0].CPUMicros; c == nil || *c != (spread{35, 30, 40, 2}) {
		t.Errorf("skiplock CPU %+v", c)
	}
	if w := sum.Systems[2].WALBytes; w == nil || *w != (spread{800, 800, 800, 1}) || sum.Systems[2].CPUMicros != nil {
		t.Errorf("graphile-worker cost %+v %+v", sum.Systems[2].CPUMicros, w)
	}
	var got []string
	for _, r := range sum.Ratios {
		got = append(got, fmt.Sprintf("%s %s %.3g (%.3g-%.3g)", r.Peer, r.Metric, r.Median, r.Min, r.Max))
	}
	want := []string{
		"river jobs_per_sec 1 (1-1)",
		"river server_cpu_per_job 0.4 (0.3-0.5)",
		"river server_wal_per_job 0.375 (0.25-0.5)",
		"graphile-worker jobs_per_sec 1 (1-1)",
		"graphile-worker server_wal_per_job 0.75 (0.75-0.75)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ratios\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	line, err := summaryLine(sum)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(line), `"server_cpu_us_per_job":{"median":35,"min":30,"max":40,"n":2}`) {
		t.Errorf("summary line without skiplock's CPU per job: %s", line)
	}
	var b strings.Builder
	if err := writeSummaries(&b, []stepSummary{sum}, []string{"skiplock", "river", "graphile-worker"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "server µs/job") || !strings.Contains(b.String(), "35 (30-40)") {
		t.Errorf("table without the cost columns:\n%s", b.String())
	}
}

func TestParseMarkAndWithFields(t *testing.T) {
	t.Parallel()
	if s, m, ok := parseMark([]byte(`{"mark":"drain_end","scenario":"work_drain"}`)); !ok || s != "work_drain" || m != "drain_end" {
		t.Errorf("parseMark = %q %q %v", s, m, ok)
	}
	for _, line := range []string{`{"system":"river","scenario":"work_drain"}`, `{"mark":`, `not json`} {
		if _, _, ok := parseMark([]byte(line)); ok {
			t.Errorf("%s read as a mark", line)
		}
	}
	got := withFields([]byte(`{"system":"river","jobs":1}`), []benchresult.Field{{Key: "wal", Value: 12.5}, {Key: "note", Value: `a "b"`}})
	if want := `{"system":"river","jobs":1,"wal":12.5,"note":"a \"b\""}`; string(got) != want {
		t.Errorf("withFields = %s, want %s", got, want)
	}
}
