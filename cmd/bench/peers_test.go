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
		ratios := peerRatios(ours, lines[2:])
		if len(ratios) != 2 {
			t.Fatalf("ratios %+v", ratios)
		}
		// jobs/s for insert_single; p50, the peer's over skiplock's, for latency (the table's
		// peersByLatency), since the schedule fixes the jobs/s.
		if want := 1083 / lines[2].Result.JobsPerSec(); ratios[0].Name != "insert_single, skiplock / graphile-worker" || !approx(ratios[0].Value, want) {
			t.Errorf("insert_single ratio %v", ratios[0].Value)
		}
		if ratios[1].Name != "latency p50, graphile-worker / skiplock" || !approx(ratios[1].Value, 4) {
			t.Errorf("latency ratio %+v", ratios[1])
		}
	})
}
