package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

func noEnv(string) string { return "" }

func TestParseFlags(t *testing.T) {
	t.Parallel()

	t.Run("DefaultsRunEveryScenario", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseFlags(nil, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.scenarios, allScenarios) {
			t.Errorf("scenarios = %v, want %v", cfg.scenarios, allScenarios)
		}
		if cfg.jobs != 50000 || cfg.workers != 100 || cfg.batch != 5000 || cfg.databaseURL != "" {
			t.Errorf("unexpected defaults: %+v", cfg)
		}
		if !slices.Equal(cfg.scaleProcs, []int{1, 2, 4}) {
			t.Errorf("scaleProcs = %v", cfg.scaleProcs)
		}
	})

	t.Run("DatabaseURLFromEnvironment", func(t *testing.T) {
		t.Parallel()
		getenv := func(k string) string {
			if k == "DATABASE_URL" {
				return "postgres://example/db"
			}
			return ""
		}
		cfg, err := parseFlags(nil, getenv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.databaseURL != "postgres://example/db" {
			t.Errorf("databaseURL = %q", cfg.databaseURL)
		}
	})

	t.Run("ScenariosRunInCanonicalOrder", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseFlags([]string{"-scenarios", "naive, work_drain,naive,insert_bulk"}, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"insert_bulk", "work_drain", "naive"}; !slices.Equal(cfg.scenarios, want) {
			t.Errorf("scenarios = %v, want %v", cfg.scenarios, want)
		}
	})

	t.Run("ScaleProcsSortedAndDeduplicated", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseFlags([]string{"-scale-procs", "4,1,4,2"}, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.scaleProcs, []int{1, 2, 4}) {
			t.Errorf("scaleProcs = %v", cfg.scaleProcs)
		}
	})

	t.Run("HelpIsNotAnError", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		_, err := parseFlags([]string{"-h"}, noEnv, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("err = %v, want flag.ErrHelp", err)
		}
		if !strings.Contains(out.String(), "work_drain") {
			t.Errorf("usage does not list the scenarios:\n%s", out.String())
		}
	})

	invalid := []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"UnknownScenario", []string{"-scenarios", "work_drain,fast"}, noEnv, `unknown scenario "fast"`},
		{"NoScenario", []string{"-scenarios", " , "}, noEnv, "names no scenario"},
		{"TooFewJobs", []string{"-jobs", "5"}, noEnv, "-jobs must be at least 10"},
		{"ZeroWorkers", []string{"-workers", "0"}, noEnv, "-workers must be between 1 and 10000"},
		{"BatchAboveSQLLimit", []string{"-batch", "100001"}, noEnv, "-batch must be between 1 and 100000"},
		{"NegativeInterval", []string{"-latency-interval", "-1ms"}, noEnv, "-latency-interval cannot be negative"},
		{"BadScaleProcs", []string{"-scale-procs", "1,x"}, noEnv, `-scale-procs: "x" is not an integer`},
		{"NoWorkflows", []string{"-workflows", "0"}, noEnv, "-workflows must be between 1 and 1000000"},
		{"PublicSchema", []string{"-schema", "public"}, noEnv, "would be dropped"},
		{"CatalogSchema", []string{"-schema", "pg_catalog"}, noEnv, "would be dropped"},
		{"UnknownPeer", []string{"-peers", "sidekiq"}, noEnv, `unknown peer "sidekiq"`},
		{"PeersNeedThrowawayServer", []string{"-peers", "river", "-database-url", "postgres://x/y"}, noEnv, "-peers needs the throwaway server"},
		{"StatementsNeedThrowawayServer", []string{"-pg-stat-statements"},
			func(k string) string { return map[string]string{"DATABASE_URL": "postgres://x/y"}[k] }, "-pg-stat-statements needs the throwaway server"},
		{"StrayArgument", []string{"work_drain"}, noEnv, `unexpected argument "work_drain"`},
	}
	for _, tc := range invalid {
		t.Run("Rejects"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseFlags(tc.args, tc.env, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestJSONLineRoundTripsThroughThePeerParser: a -json line reads back as a peer's does.
// The line format itself is tested in internal/benchresult.
func TestJSONLineRoundTripsThroughThePeerParser(t *testing.T) {
	t.Parallel()
	r := &result{Result: benchresult.Result{Scenario: "steady", Jobs: 30000, Seconds: 15}}
	r.setLatency("x", []time.Duration{4 * time.Millisecond})
	line, err := r.JSONLine("skiplock", "devel", nil)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := parsePeerLine(bytes.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if pl.System != "skiplock" || pl.Result.Scenario != "steady" || pl.Result.JobsPerSec() != 2000 ||
		pl.Result.Latency == nil || pl.Result.Latency.P50 != 4*time.Millisecond {
		t.Errorf("parsed %+v %+v", pl, pl.Result)
	}
}

func TestParsePeerOutput(t *testing.T) {
	t.Parallel()
	out := []byte(`npm warn something
{"system":"river","version":"v0.51.2","scenario":"work_drain","jobs":50000,"seconds":10,"jobs_per_sec":5000,"workers":100}
{"system":"graphile-worker","version":"0.18.0","scenario":"latency","jobs":500,"seconds":5,"jobs_per_sec":100,"p50_ms":3.5,"p99_ms":9}
`)
	lines, err := parsePeerOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("got %d lines", len(lines))
	}
	if lines[0].System != "river" || lines[0].Result.JobsPerSec() != 5000 || lines[0].Result.Latency != nil {
		t.Errorf("line 0: %+v %+v", lines[0], lines[0].Result)
	}
	if l := lines[1].Result.Latency; l == nil || l.P50 != 3500*time.Microsecond || l.P99 != 9*time.Millisecond {
		t.Errorf("line 1 latency: %+v", l)
	}

	ours := map[string]*result{
		"work_drain": {Result: benchresult.Result{Scenario: "work_drain", Jobs: 50000, Seconds: 5}},
		"latency":    {Result: benchresult.Result{Scenario: "latency", Latency: &benchresult.Stats{P50: 1750 * time.Microsecond}}},
	}
	if v, ok := roundRatio("", ours["work_drain"], lines[0].Result); !ok || v != 2 {
		t.Errorf("work_drain ratio = %v, %v", v, ok)
	}
	if v, ok := roundRatio("p50", ours["latency"], lines[1].Result); !ok || v != 2 {
		t.Errorf("latency ratio = %v, %v", v, ok)
	}

	if _, err := parsePeerOutput([]byte(`{"scenario":"x"}`)); err == nil {
		t.Error("a line without system was accepted")
	}
}

func TestRatesAndCDF(t *testing.T) {
	t.Parallel()
	pts := rates([]sample{{0, 0}, {200 * time.Millisecond, 100}, {400 * time.Millisecond, 100}, {500 * time.Millisecond, 300}})
	want := []point{{0.2, 500}, {0.4, 0}, {0.5, 2000}}
	if len(pts) != len(want) {
		t.Fatalf("rates = %v", pts)
	}
	for i := range want {
		if !approx(pts[i].X, want[i].X) || !approx(pts[i].Y, want[i].Y) {
			t.Errorf("rates[%d] = %v, want %v", i, pts[i], want[i])
		}
	}

	c := cdf([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}, 300)
	if c[0].X != 1 || c[len(c)-1].X != 3 || c[len(c)-1].Y != 1 {
		t.Errorf("cdf = %v", c)
	}
}

func approx(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestPlotIsWellFormedSVG(t *testing.T) {
	t.Parallel()
	r1 := &result{Result: benchresult.Result{Scenario: "work_drain <&>"}, Series: []sample{{0, 0}, {sampleInterval, 1000}, {2 * sampleInterval, 2500}}}
	r2 := &result{Result: benchresult.Result{Scenario: "latency"}, Series: []sample{{0, 0}, {sampleInterval, 20}}}
	r2.setLatency("enqueue -> start", []time.Duration{time.Millisecond, 5 * time.Millisecond, 40 * time.Millisecond})
	svg := renderSVG("title", []chart{
		{Title: "t", XLabel: "s", YLabel: "jobs/s", YLog: true, Series: []plotSeries{{r1.Scenario, rates(r1.Series)}, {r2.Scenario, rates(r2.Series)}}},
		{Title: "l", XLabel: "ms", YLabel: "fraction", XLog: true, Series: []plotSeries{{"latency", cdf(r2.Latencies, 300)}}},
		{Title: "empty"},
	})
	dec := xml.NewDecoder(bytes.NewReader(svg))
	polylines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("invalid XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != 3 {
		t.Errorf("got %d polylines, want 3", polylines)
	}
	if !bytes.Contains(svg, []byte("work_drain &lt;&amp;&gt;")) {
		t.Error("series name not escaped")
	}
}

func TestNiceStep(t *testing.T) {
	t.Parallel()
	for raw, want := range map[float64]float64{0.3: 0.5, 1: 1, 1.1: 2, 3: 5, 7: 10, 180: 200, 0: 1} {
		if got := niceStep(raw); !approx(got, want) {
			t.Errorf("niceStep(%g) = %g, want %g", raw, got, want)
		}
	}
}
