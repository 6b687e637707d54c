package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// TestParseHarnessOutput reads output the two harnesses printed (testdata/peers, from
// `-scenarios insert_single,latency -peers river,graphile-worker -json`, npm's summary line
// included) the way runPeer does.
func TestParseHarnessOutput(t *testing.T) {
	t.Parallel()
	out, err := os.ReadFile(filepath.Join("testdata", "peers", "output.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := parsePeerOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pl := range lines {
		got = append(got, pl.System+" "+pl.Version+" "+pl.Result.Scenario)
	}
	want := []string{
		"river v0.51.2 insert_single", "river v0.51.2 latency",
		"graphile-worker 0.18.0 insert_single", "graphile-worker 0.18.0 latency",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}

	t.Run("LinesStartWithTheFieldsOfCmdBenchJSON", func(t *testing.T) {
		t.Parallel()
		for _, pl := range lines {
			dec := json.NewDecoder(bytes.NewReader(pl.Raw))
			var keys []string
			_, _ = dec.Token() // {
			for len(keys) < 6 && dec.More() {
				k, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k.(string))
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
			if want := []string{"system", "version", "scenario", "jobs", "seconds", "jobs_per_sec"}; !slices.Equal(keys, want) {
				t.Errorf("%s %s: keys %q, want %q", pl.System, pl.Result.Scenario, keys, want)
			}
			if !bytes.HasPrefix(bytes.TrimSpace(out[bytes.Index(out, pl.Raw):]), pl.Raw) {
				t.Errorf("Raw is not the line as printed: %s", pl.Raw)
			}
		}
	})

	t.Run("InsertCallLatency", func(t *testing.T) {
		t.Parallel()
		r := lines[0].Result
		if r.Jobs != 20 || r.Seconds != 0.0369 {
			t.Errorf("jobs %d seconds %v", r.Jobs, r.Seconds)
		}
		want := benchresult.Stats{P50: 7118 * time.Microsecond, P95: 34744 * time.Microsecond, P99: 35241 * time.Microsecond, Max: 35241 * time.Microsecond}
		if r.Latency == nil || *r.Latency != want {
			t.Errorf("latency %+v, want %+v", r.Latency, want)
		}
	})

	t.Run("EnqueueToStartLatency", func(t *testing.T) {
		t.Parallel()
		r := lines[3].Result
		want := benchresult.Stats{P50: 7888 * time.Microsecond, P95: 11825 * time.Microsecond, P99: 16095 * time.Microsecond, Max: 16095 * time.Microsecond}
		if r.Latency == nil || *r.Latency != want {
			t.Errorf("latency %+v, want %+v", r.Latency, want)
		}
	})

	t.Run("RatiosByTheTable", func(t *testing.T) {
		t.Parallel()
		ours := map[string]*result{
			"insert_single": {Result: benchresult.Result{Scenario: "insert_single", Jobs: 1083, Seconds: 1}},
			"latency":       {Result: benchresult.Result{Scenario: "latency", Jobs: 20, Seconds: 0.2, Latency: &benchresult.Stats{P50: 1972 * time.Microsecond}}},
		}
		// jobs/s for insert_single; p50, the peer's over skiplock's, for latency (the table's
		// peerLatency), since the schedule fixes the jobs/s.
		for _, pl := range lines[2:] {
			rr := newRoundResults(pl.Result.Scenario, 1, []string{"skiplock", pl.System})
			rr.set("skiplock", 1, ours[pl.Result.Scenario])
			rr.set(pl.System, 1, pl.Result)
			sum := rr.summarize(scenarioNamed(pl.Result.Scenario).peerLatency)
			if len(sum.Ratios) != 1 {
				t.Fatalf("%s: ratios %+v", pl.Result.Scenario, sum.Ratios)
			}
			got := sum.Ratios[0]
			want, metric := 1083/pl.Result.JobsPerSec(), "jobs_per_sec"
			if pl.Result.Scenario == "latency" {
				want, metric = 4, "p50"
			}
			if got.Metric != metric || !approx(got.Median, want) || got.N != 1 {
				t.Errorf("%s: ratio %+v, want %s %v", pl.Result.Scenario, got, metric, want)
			}
		}
	})
}
