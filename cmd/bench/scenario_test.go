package main

import (
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

func TestScenarioTable(t *testing.T) {
	t.Parallel()

	t.Run("RowsAreComplete", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for i, s := range scenarios {
			if s.name == "" || s.doc == "" || s.run == nil {
				t.Errorf("row %d (%q) lacks a name, doc or run", i, s.name)
			}
			if seen[s.name] {
				t.Errorf("scenario %q listed twice", s.name)
			}
			seen[s.name] = true
			for _, p := range s.peers {
				if peerNamed(p) == nil {
					t.Errorf("scenario %s names unknown peer %q", s.name, p)
				}
			}
			if s.peerLatency != "" && (len(s.peers) == 0 || (s.peerLatency != "p50" && s.peerLatency != "p99")) {
				t.Errorf("scenario %s compares peers by latency %q but no peer runs it or it is not p50 or p99", s.name, s.peerLatency)
			}
		}
	})

	t.Run("BaselinesRunEarlier", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseFlags(nil, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var steps []string // every step of a default run, in run order
		for _, name := range cfg.scenarios {
			steps = append(steps, scenarioNamed(name).stepsOf(cfg)...)
		}
		for _, s := range scenarios {
			if s.ratio == nil || s.optIn {
				continue
			}
			b := slices.Index(steps, s.ratio.baseline)
			if b < 0 {
				t.Errorf("%s: baseline %q is no step of a default run", s.name, s.ratio.baseline)
			}
			for _, step := range s.stepsOf(cfg) {
				if step != s.ratio.baseline && slices.Index(steps, step) < b {
					t.Errorf("%s runs before its baseline %s", step, s.ratio.baseline)
				}
			}
			if s.ratio.key == "" || !strings.Contains(s.ratio.note, "%") || s.ratio.means == "" {
				t.Errorf("%s: ratio without key, note format or meaning: %+v", s.name, s.ratio)
			}
		}
	})

	t.Run("PackageDocListsTheTable", func(t *testing.T) {
		t.Parallel()
		f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if doc := f.Doc.Text(); !strings.Contains(doc, scenarioList("\t")) {
			t.Errorf("doc.go's scenario list differs from the table; it should read:\n%s", scenarioList("//\t"))
		}
	})

	t.Run("PerformanceDocMentionsEveryScenario", func(t *testing.T) {
		t.Parallel()
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range scenarios {
			// A row of the method table: | `name` … or | `name_1p/2p/4p` ….
			if !strings.Contains(string(b), "| `"+s.name) {
				t.Errorf("docs/performance.md has no row for scenario %s", s.name)
			}
		}
	})

	t.Run("UsageListsTheTable", func(t *testing.T) {
		t.Parallel()
		var out strings.Builder
		_, _ = parseFlags([]string{"-h"}, noEnv, &out)
		if !strings.Contains(out.String(), scenarioList("  ")) {
			t.Errorf("-h does not list the scenario table:\n%s", out.String())
		}
	})

	t.Run("PeersRunTheirScenariosInRunOrder", func(t *testing.T) {
		t.Parallel()
		all := scenarioOrder()
		for _, p := range knownPeers {
			if got, want := peerScenarios(all, p), []string{"insert_bulk", "insert_single", "work_drain", "work_drain_1000", "latency", "steady", "steady_rate"}; !slices.Equal(got, want) {
				t.Errorf("%s runs %v, want %v", p, got, want)
			}
		}
		if got := peerScenarios([]string{"steady", "naive", "insert_bulk"}, "river"); !slices.Equal(got, []string{"steady", "insert_bulk"}) {
			t.Errorf("peerScenarios keeps %v", got)
		}
	})
}

// TestRatios checks the ratio fields of the JSON lines and the ratios section against the
// values and wording the table gives them.
func TestRatios(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	jobsPerSec := map[string]float64{
		"work_drain": 20000, "steady": 2000, "bloat": 19000, "held_xmin": 1000,
		"scale_1p": 18000, "scale_2p": 27000, "scale_4p": 22500, "naive": 4000,
		"limit_slots": 16000, "limit_half": 12000, "limit_per_key": 8000, "fair": 15000, "ordered": 14000,
	}
	var results []*result
	byName := map[string]*result{}
	for _, name := range cfg.scenarios {
		s := scenarioNamed(name)
		for _, step := range s.stepsOf(cfg) {
			res := &result{Result: benchresult.Result{Scenario: step, Jobs: int64(jobsPerSec[step]), Seconds: 1}}
			results = append(results, res)
			byName[step] = res
			addRatioFields(s, res, byName)
		}
	}
	field := func(res *result, key string) any {
		for _, f := range res.Extra {
			if f.Key == key {
				return f.Value
			}
		}
		return nil
	}
	for _, c := range []struct {
		step, key string
		want      float64
		note      string
	}{
		{"bloat", "ratio_to_work_drain", 0.95, "0.95x work_drain"},
		{"limit_slots", "ratio_to_work_drain", 0.8, "0.80x work_drain"},
		{"limit_per_key", "ratio_to_work_drain", 0.4, "0.40x work_drain"},
		{"fair", "ratio_to_work_drain", 0.75, "0.75x work_drain"},
		{"ordered", "ratio_to_work_drain", 0.7, "0.70x work_drain"},
		{"held_xmin", "ratio_to_steady", 0.5, "0.50x steady"},
		{"scale_2p", "ratio_to_1p", 1.5, "1.50x scale_1p"},
		{"scale_4p", "ratio_to_1p", 1.25, "1.25x scale_1p"},
		{"naive", "skiplock_work_drain_ratio", 5, "skiplock work_drain is 5.00x this"},
	} {
		res := byName[c.step]
		if got := field(res, c.key); got != c.want {
			t.Errorf("%s: %s = %v, want %v", c.step, c.key, got, c.want)
		}
		if !slices.Contains(res.Notes, c.note) {
			t.Errorf("%s: notes %q lack %q", c.step, res.Notes, c.note)
		}
	}
	if len(byName["scale_1p"].Extra) != 0 || len(byName["work_drain"].Extra) != 0 {
		t.Errorf("a baseline got a ratio field: %+v %+v", byName["scale_1p"].Extra, byName["work_drain"].Extra)
	}

	var names []string
	for _, l := range ratioLines(cfg, results, byName) {
		names = append(names, l.Name)
	}
	want := []string{"work_drain / naive", "bloat / work_drain", "limit_slots / work_drain", "limit_half / work_drain",
		"limit_per_key / work_drain", "fair / work_drain", "ordered / work_drain", "held_xmin / steady", "scale 2p / 1p", "scale 4p / 1p"}
	if !slices.Equal(names, want) {
		t.Errorf("ratio lines %q, want %q", names, want)
	}

	// An opt-in step's ratio to a step of the default set, when -scenarios names both.
	both, err := parseFlags([]string{"-scenarios", "workflow,work_drain"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"work_drain", "workflow"}; !slices.Equal(both.scenarios, want) {
		t.Fatalf("scenarios = %v, want %v", both.scenarios, want)
	}
	optIn := map[string]*result{}
	var optInResults []*result
	for _, step := range both.scenarios {
		res := &result{Result: benchresult.Result{Scenario: step, Jobs: map[string]int64{"work_drain": 20000, "workflow": 10000}[step], Seconds: 1}}
		optInResults = append(optInResults, res)
		optIn[step] = res
		addRatioFields(scenarioNamed(step), res, optIn)
	}
	if got := field(optIn["workflow"], "ratio_to_work_drain"); got != 0.5 || !slices.Contains(optIn["workflow"].Notes, "0.50x work_drain") {
		t.Errorf("workflow: ratio_to_work_drain = %v, notes %q; want 0.5 and 0.50x work_drain", got, optIn["workflow"].Notes)
	}
	if l := ratioLines(both, optInResults, optIn); len(l) != 1 || l[0].Name != "workflow / work_drain" {
		t.Errorf("ratio lines of work_drain,workflow: %+v", l)
	}

	// A baseline that did not run, or ran at 0 jobs/s, gives no ratio rather than Inf.
	zero := &result{Result: benchresult.Result{Scenario: "naive", Jobs: 0, Seconds: 1}}
	addRatioFields(scenarioNamed("naive"), zero, map[string]*result{"work_drain": byName["work_drain"]})
	lone := &result{Result: benchresult.Result{Scenario: "bloat", Jobs: 10, Seconds: 1}}
	addRatioFields(scenarioNamed("bloat"), lone, map[string]*result{})
	if len(zero.Extra)+len(lone.Extra) != 0 {
		t.Errorf("ratio without a usable baseline: %+v %+v", zero.Extra, lone.Extra)
	}
}
