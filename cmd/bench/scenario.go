package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// scenario is one row of the benchmark's scenario table. Everything else about a scenario
// derives from its row: the names -scenarios accepts and the order they run in, the list in
// -h and in the package documentation (a test checks doc.go and docs/performance.md against
// the table), the result lines and their ratio fields, the ratios section of the table, and
// which peer harnesses run it too.
type scenario struct {
	name string
	// optIn scenarios run only when -scenarios names them: never by default nor with "all".
	optIn bool
	// doc says what the scenario times, for -h and doc.go; "\n" starts a continuation line.
	doc string
	// steps names the result lines of one run of the scenario; nil means one line named
	// after the scenario.
	steps func(cfg *config) []string
	// run measures step i of steps (0 for a scenario of one step).
	run func(ctx context.Context, r *runner, step int) (*result, error)
	// ratio compares each step with a baseline measured earlier in the same run; nil: none.
	ratio *ratio
	// peers lists the peer harnesses that run the scenario too (see peers.go).
	peers []string
	// peerLatency, "p50" or "p99", compares the peers on that enqueue -> start latency
	// instead of jobs/s, because the scenario's schedule fixes its jobs/s; "": jobs/s.
	peerLatency string
}

// ratio is a ratio of jobs/s measured side by side in one run: a step over its baseline,
// or with inverse the baseline over the step (so that above 1 always favours the newer
// design). It goes on the JSON line of the step (key) and in the table's notes and ratios
// section.
type ratio struct {
	baseline string // the step compared with; it runs earlier
	inverse  bool
	key      string // JSON field on the step's line
	note     string // the table note, formatting the value
	means    string // how to read it, in the ratios section
	// label names the ratio in the ratios section; nil: "numerator / denominator".
	label func(step string) string
}

// wideSlots is the slot count of work_drain_1000, for skiplock and the peers alike (the
// harnesses have the same constant).
const wideSlots = 1000

// bothPeers is the peers list of the scenarios every peer harness runs.
var bothPeers = []string{"river", "graphile-worker"}

// scenarios is the scenario table, in run order.
var scenarios = []scenario{
	{
		name:  "insert_bulk",
		doc:   "N jobs through driver.EnqueueMany (jobs_enqueue_many) in batches of -batch",
		run:   func(ctx context.Context, r *runner, _ int) (*result, error) { return r.insertBulk(ctx) },
		peers: bothPeers,
	},
	{
		name:  "insert_single",
		doc:   "N/10 jobs, one driver.Enqueue transaction each, from -producers goroutines",
		run:   func(ctx context.Context, r *runner, _ int) (*result, error) { return r.insertSingle(ctx) },
		peers: bothPeers,
	},
	{
		name: "work_drain",
		doc:  "N no-op jobs queued, then the workers start; time to the last completion",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "work_drain", r.cfg.workers, 0, nil)
		},
		peers: bothPeers,
	},
	{
		name: "work_drain_1000",
		doc: "work_drain with 1,000 slots (pool unchanged), and the peers at 1,000 slots\n" +
			"with their settings for that count",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "work_drain_1000", wideSlots, 0, nil)
		},
		peers: bothPeers,
	},
	{
		name: "latency",
		doc: "idle workers; -latency-jobs jobs enqueued one at a time -latency-interval\n" +
			"apart; enqueue commit -> handler start",
		run:         func(ctx context.Context, r *runner, _ int) (*result, error) { return r.latency(ctx) },
		peers:       bothPeers,
		peerLatency: "p50",
	},
	{
		name:  "steady",
		doc:   "-producers enqueue at full rate while the workers drain, -steady-duration",
		run:   func(ctx context.Context, r *runner, _ int) (*result, error) { return r.steady(ctx, "steady", false) },
		peers: bothPeers,
	},
	{
		name: "steady_rate",
		doc: "-producers enqueue one job per transaction at -rate jobs/s (default: half\n" +
			"of skiplock's work_drain or insert_single, the lower) for -steady-duration;\n" +
			"enqueue commit -> handler start, achieved rate, backlog at the end",
		run:         func(ctx context.Context, r *runner, _ int) (*result, error) { return r.steadyRate(ctx, r.arrivalRate) },
		peers:       bothPeers,
		peerLatency: "p99",
	},
	{
		name: "bloat",
		doc:  "work_drain with -bloat-rows finished jobs in the table (ratio to work_drain)",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "bloat", r.cfg.workers, r.cfg.bloatRows, nil)
		},
		ratio: &ratio{baseline: "work_drain", key: "ratio_to_work_drain", note: "%.2fx work_drain",
			means: "drain with -bloat-rows finished jobs in the table vs a clean table (1.00: no cost)"},
	},
	{
		name: "limit_slots",
		doc:  "work_drain on a queue with max_running = -workers (ratio to work_drain)",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "limit_slots", r.cfg.workers, 0, &drainLimits{maxRunning: r.cfg.workers})
		},
		ratio: &ratio{baseline: "work_drain", key: "ratio_to_work_drain", note: "%.2fx work_drain",
			means: "drain of a queue with max_running = slots vs no limit (aim: at least 0.85)"},
	},
	{
		name: "limit_half",
		doc:  "work_drain on a queue with max_running = -workers/2 (ratio to work_drain)",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "limit_half", r.cfg.workers, 0, &drainLimits{maxRunning: max(1, r.cfg.workers/2)})
		},
		ratio: &ratio{baseline: "work_drain", key: "ratio_to_work_drain", note: "%.2fx work_drain",
			means: "drain of a queue with max_running = slots/2 vs no limit"},
	},
	{
		name: "limit_per_key",
		doc:  "work_drain of jobs over 100 concurrency keys, per_key 1 (ratio to work_drain)",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "limit_per_key", r.cfg.workers, 0, &drainLimits{perKey: 1, keys: 100})
		},
		ratio: &ratio{baseline: "work_drain", key: "ratio_to_work_drain", note: "%.2fx work_drain",
			means: "drain of a queue with per_key 1 over 100 keys vs no limit"},
	},
	{
		name: "fair",
		doc: "work_drain over 1,000 concurrency keys, fair, per_key -workers, k0 holding 90%\n" +
			"(enqueued first; ratio to work_drain); when the other keys' last job started",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "fair", r.cfg.workers, 0,
				&drainLimits{perKey: r.cfg.workers, fair: true, keys: flowKeys, hotShare: fairHotShare})
		},
		ratio: &ratio{baseline: "work_drain", key: "ratio_to_work_drain", note: "%.2fx work_drain",
			means: "drain of a fair queue, one key holding 90% of the jobs, vs no limit (aim: at least 0.7)"},
	},
	{
		name: "ordered",
		doc: "work_drain over 1,000 concurrency keys, ordered (ratio to work_drain); starts\n" +
			"out of id order within a key",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) {
			return r.workDrain(ctx, "ordered", r.cfg.workers, 0, &drainLimits{ordered: true, keys: flowKeys})
		},
		ratio: &ratio{baseline: "work_drain", key: "ratio_to_work_drain", note: "%.2fx work_drain",
			means: "drain of an ordered queue over 1,000 keys vs no limit (aim: at least 0.7)"},
	},
	{
		name: "held_xmin",
		doc:  "steady while another session holds a REPEATABLE READ snapshot (ratio to steady)",
		run:  func(ctx context.Context, r *runner, _ int) (*result, error) { return r.steady(ctx, "held_xmin", true) },
		ratio: &ratio{baseline: "steady", key: "ratio_to_steady", note: "%.2fx steady",
			means: "steady with a snapshot held open vs without (1.00: no cost)"},
	},
	{
		name: "scale",
		doc:  "work_drain with 1, 2 and 4 worker processes (this binary re-executed)",
		steps: func(cfg *config) []string {
			var steps []string
			for _, p := range cfg.scaleProcs {
				steps = append(steps, fmt.Sprintf("scale_%dp", p))
			}
			return steps
		},
		run: func(ctx context.Context, r *runner, step int) (*result, error) {
			return r.scale(ctx, r.cfg.scaleProcs[step])
		},
		ratio: &ratio{baseline: "scale_1p", key: "ratio_to_1p", note: "%.2fx scale_1p",
			means: "drain with more worker processes",
			label: func(step string) string { return "scale " + strings.TrimPrefix(step, "scale_") + " / 1p" }},
	},
	{
		name: "naive",
		doc: "the seed design, one SELECT … FOR UPDATE SKIP LOCKED LIMIT 1 + UPDATE\n" +
			"transaction per job from -naive-workers goroutines, on the same server",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) { return r.naive(ctx) },
		ratio: &ratio{baseline: "work_drain", inverse: true, key: "skiplock_work_drain_ratio",
			note: "skiplock work_drain is %.2fx this", means: "skiplock vs the seed design (one job per transaction)"},
	},
	{
		name:  "retention",
		optIn: true,
		doc: "opt-in: the workers drain at full rate for -retention-duration, done jobs\n" +
			"kept, then deleted 10 s after finishing by the clients' jobs_maintain\n" +
			"(ratio to retention_keep); reports the done rows over time",
		steps: func(*config) []string { return []string{"retention_keep", "retention"} },
		run: func(ctx context.Context, r *runner, step int) (*result, error) {
			if step == 0 {
				return r.retention(ctx, "retention_keep", false)
			}
			return r.retention(ctx, "retention", true)
		},
		ratio: &ratio{baseline: "retention_keep", key: "ratio_to_retention_keep", note: "%.2fx retention_keep",
			means: "drain with done jobs deleted 10 s after finishing vs kept (1.00: pruning costs nothing)"},
	},
	{
		name:  "chaos",
		optIn: true,
		doc: "opt-in (only when -scenarios names it; throwaway server only): the chaos\n" +
			"suite of internal/chaos with N jobs, -chaos-workers processes and\n" +
			"-chaos-kills kills, fast and immediate restarts; see chaos.go",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) { return r.chaos(ctx) },
	},
	{
		name:  "upgrade",
		optIn: true,
		doc: "opt-in: a schema at the migration before the newest, holding -upgrade-rows\n" +
			"jobs (mostly done), migrated to the newest while one session enqueues and\n" +
			"another reads by id; reports the migration's time and their longest waits",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) { return r.upgrade(ctx) },
	},
	{
		name:  "shards",
		optIn: true,
		doc: "opt-in: work_drain of N jobs spread over 1, 2 and 4 shards, each a throwaway\n" +
			"cluster of its own, through one driver.ShardedClient with -workers slots per\n" +
			"shard; reports the CPU per job of the clusters and of the bench; see shards.go",
		steps: func(*config) []string {
			var steps []string
			for _, k := range shardCounts {
				steps = append(steps, fmt.Sprintf("shards_%d", k))
			}
			return steps
		},
		run: func(ctx context.Context, r *runner, step int) (*result, error) {
			return r.shards(ctx, shardCounts[step])
		},
		ratio: &ratio{baseline: "shards_1", key: "ratio_to_1_shard", note: "%.2fx shards_1",
			means: "drain through more shards, all on this machine's CPUs",
			label: func(step string) string { return "shards " + strings.TrimPrefix(step, "shards_") + " / 1" }},
	},
	{
		name:  "workflow",
		optIn: true,
		doc: "opt-in: -workflows diamonds of 4 no-op jobs (a -> b, c -> d) enqueued with\n" +
			"jobs_enqueue_workflow (untimed), then drained as work_drain (ratio to\n" +
			"work_drain when it runs too)",
		run: func(ctx context.Context, r *runner, _ int) (*result, error) { return r.workflowDrain(ctx) },
		ratio: &ratio{baseline: "work_drain", key: "ratio_to_work_drain", note: "%.2fx work_drain",
			means: "drain of diamond workflows (each child released by its parents' completions) vs independent jobs"},
	},
}

// allScenarios lists the scenarios a run without -scenarios runs, in run order: every
// scenario but the opt-in ones.
var allScenarios = scenarioNames(func(s *scenario) bool { return !s.optIn })

// scenarioOrder is every scenario -scenarios accepts, in run order.
func scenarioOrder() []string { return scenarioNames(func(*scenario) bool { return true }) }

func scenarioNames(keep func(*scenario) bool) []string {
	var names []string
	for i := range scenarios {
		if keep(&scenarios[i]) {
			names = append(names, scenarios[i].name)
		}
	}
	return names
}

// scenarioNamed returns the table row of name, or nil.
func scenarioNamed(name string) *scenario {
	for i := range scenarios {
		if scenarios[i].name == name {
			return &scenarios[i]
		}
	}
	return nil
}

// stepsOf returns the result lines one run of s produces.
func (s *scenario) stepsOf(cfg *config) []string {
	if s.steps == nil {
		return []string{s.name}
	}
	return s.steps(cfg)
}

// scenarioList renders the table for -h and the package documentation: one scenario per
// line, its doc after the name, continuation lines aligned under the doc, each line
// starting with indent.
func scenarioList(indent string) string {
	width := 0
	for _, s := range scenarios {
		width = max(width, len(s.name))
	}
	var b strings.Builder
	for _, s := range scenarios {
		for i, line := range strings.Split(s.doc, "\n") {
			name := ""
			if i == 0 {
				name = s.name
			}
			fmt.Fprintf(&b, "%s%-*s  %s\n", indent, width, name, line)
		}
	}
	return b.String()
}

// peerScenarios returns the scenarios of names that peer runs too, in run order.
func peerScenarios(names []string, peer string) []string {
	var out []string
	for _, name := range names {
		if s := scenarioNamed(name); s != nil && slices.Contains(s.peers, peer) {
			out = append(out, name)
		}
	}
	return out
}

// ratioOf returns the ratio of step (one of s's steps) to its baseline in byName, the
// results so far; ok is false when there is none: no ratio in the table, the step is its
// own baseline, the baseline did not run, or its jobs/s is zero (Inf or NaN, which JSON
// cannot encode).
func (s *scenario) ratioOf(step string, res *result, byName map[string]*result) (v float64, ok bool) {
	rt := s.ratio
	if rt == nil || step == rt.baseline {
		return 0, false
	}
	b, found := byName[rt.baseline]
	if !found {
		return 0, false
	}
	num, den := res, b
	if rt.inverse {
		num, den = b, res
	}
	if den.JobsPerSec() <= 0 {
		return 0, false
	}
	return num.JobsPerSec() / den.JobsPerSec(), true
}

// addRatioFields puts the ratio of s's step res, if any, on its JSON line and in its notes.
func addRatioFields(s *scenario, res *result, byName map[string]*result) {
	v, ok := s.ratioOf(res.Scenario, res, byName)
	if !ok {
		return
	}
	v = benchresult.Round(v, 3)
	res.Add(s.ratio.key, v)
	res.note(s.ratio.note, v)
}

// ratioLines lists the ratios of this run for the table, in the run order of their
// numerators. results are the steps in the order they ran; byName is the result of each
// step that ratios use, the one the JSON lines' ratio fields used (of a step that ran in
// rounds, its median round).
func ratioLines(cfg *config, results []*result, byName map[string]*result) []ratioLine {
	type ordered struct {
		pos  int // run position of the numerator
		line ratioLine
	}
	pos := map[string]int{}
	for i, res := range results {
		pos[res.Scenario] = i
	}
	var lines []ordered
	for _, s := range scenarios {
		if s.ratio == nil {
			continue
		}
		for _, step := range s.stepsOf(cfg) {
			res, ran := byName[step]
			if !ran {
				continue
			}
			v, ok := s.ratioOf(step, res, byName)
			if !ok {
				continue
			}
			num, den := step, s.ratio.baseline
			if s.ratio.inverse {
				num, den = den, num
			}
			label := num + " / " + den
			if s.ratio.label != nil {
				label = s.ratio.label(step)
			}
			lines = append(lines, ordered{pos[num], ratioLine{label, v, s.ratio.means}})
		}
	}
	slices.SortStableFunc(lines, func(a, b ordered) int { return a.pos - b.pos })
	out := make([]ratioLine, len(lines))
	for i, l := range lines {
		out[i] = l.line
	}
	return out
}
