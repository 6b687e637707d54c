package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// peerScenarios are the scenarios the peer harnesses share with skiplock's.
var peerScenarios = []string{"insert_bulk", "insert_single", "work_drain", "latency", "steady"}

// peerLine is one JSON line of a peer harness, kept whole for -json.
type peerLine struct {
	System, Version string
	Result          *result
	Raw             []byte
}

// runPeer runs one peer harness (shared/peers/<name>/run.sh) against a database of its
// own on the throwaway server, with the same job count, worker count and steady length as
// skiplock's run, and returns its JSON lines. Tuning follows shared/README.md.
func (r *runner) runPeer(ctx context.Context, name string) ([]peerLine, error) {
	var scen []string
	for _, s := range r.cfg.scenarios {
		if slices.Contains(peerScenarios, s) {
			scen = append(scen, s)
		}
	}
	if len(scen) == 0 {
		return nil, nil
	}
	jobs := strconv.Itoa(r.cfg.jobs)
	workers := strconv.Itoa(r.cfg.workers)
	steady := r.cfg.steadyDuration
	var cmd *exec.Cmd
	switch name {
	case "river":
		cmd = exec.CommandContext(ctx, "bash", filepath.Join(r.cfg.peersDir, "river", "run.sh"),
			r.e.server.URLFor("river_bench"), jobs,
			"-workers", workers, "-scenarios", strings.Join(scen, ","),
			"-steady-duration", steady.String(), "-latency-jobs", strconv.Itoa(r.cfg.latencyJobs),
			"-latency-interval", r.cfg.latencyInterval.String(), "-producers", strconv.Itoa(r.cfg.producers),
			// River's own benchmark settings (shared/README.md).
			"-fetch-cooldown", "2ms", "-fetch-poll-interval", "20ms")
		cmd.Env = append(os.Environ(), "WORKERS="+workers)
	case "graphile-worker":
		cmd = exec.CommandContext(ctx, "bash", filepath.Join(r.cfg.peersDir, "graphile-worker", "run.sh"),
			r.e.server.URLFor("gw_bench"), jobs)
		cmd.Env = append(os.Environ(),
			"CONCURRENCY="+workers,
			"SCENARIOS="+strings.Join(scen, ","),
			"STEADY_SECONDS="+strconv.FormatFloat(steady.Seconds(), 'f', -1, 64),
			// The tuning shared/README.md gives for it.
			"PG_POOL_MAX=20", "GW_LOCAL_QUEUE_SIZE=500", "GW_COMPLETE_BATCH_DELAY=0")
	default:
		return nil, fmt.Errorf("unknown peer %q", name)
	}
	cmd.Stderr = os.Stderr
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	logf("peer %s: running %s", name, strings.Join(cmd.Args, " "))
	began := time.Now()
	runErr := cmd.Run()
	lines, err := parsePeerOutput(stdout.Bytes())
	if err != nil {
		return lines, err
	}
	if runErr != nil {
		return lines, fmt.Errorf("peer %s failed after %s: %w", name, time.Since(began).Round(time.Second), runErr)
	}
	return lines, nil
}

// parsePeerOutput reads the JSON lines of a peer harness; other lines are ignored.
func parsePeerOutput(out []byte) ([]peerLine, error) {
	var lines []peerLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		pl, err := parsePeerLine(b)
		if err != nil {
			return lines, err
		}
		lines = append(lines, pl)
	}
	return lines, sc.Err()
}

func parsePeerLine(b []byte) (peerLine, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return peerLine{}, fmt.Errorf("failed to parse peer line %q: %w", b, err)
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	num := func(k string) (float64, bool) { f, ok := m[k].(float64); return f, ok }
	res := &result{Scenario: str("scenario")}
	if res.Scenario == "" || str("system") == "" {
		return peerLine{}, fmt.Errorf("peer line without system or scenario: %s", b)
	}
	if v, ok := num("jobs"); ok {
		res.Jobs = int64(v)
	}
	if v, ok := num("seconds"); ok {
		res.Seconds = v
	}
	toDur := func(msv float64) time.Duration { return time.Duration(msv * float64(time.Millisecond)) }
	if p50, ok := num("p50_ms"); ok {
		l := latencyStats{P50: toDur(p50)}
		if v, ok := num("p95_ms"); ok {
			l.P95 = toDur(v)
		}
		if v, ok := num("p99_ms"); ok {
			l.P99 = toDur(v)
		}
		if v, ok := num("max_ms"); ok {
			l.Max = toDur(v)
		}
		res.Latency = &l
	} else if p50, ok := num("insert_p50_ms"); ok {
		l := latencyStats{P50: toDur(p50)}
		if v, ok := num("insert_p99_ms"); ok {
			l.P99 = toDur(v)
		}
		res.Latency = &l
	}
	return peerLine{System: str("system"), Version: str("version"), Result: res, Raw: append([]byte(nil), b...)}, nil
}

// peerRatios compares skiplock's results with one peer's, scenario by scenario. For
// latency the jobs/s is set by the schedule, so the p50 latencies are compared instead.
func peerRatios(ours map[string]*result, peer []peerLine) []ratioLine {
	var out []ratioLine
	for _, pl := range peer {
		s, ok := ours[pl.Result.Scenario]
		if !ok {
			continue
		}
		if pl.Result.Scenario == "latency" {
			if s.Latency != nil && pl.Result.Latency != nil && s.Latency.P50 > 0 {
				out = append(out, ratioLine{
					Name:  fmt.Sprintf("latency p50, %s / skiplock", pl.System),
					Value: float64(pl.Result.Latency.P50) / float64(s.Latency.P50),
					Means: fmt.Sprintf("skiplock %s ms vs %s %s ms (>1: skiplock starts jobs sooner)", fmtMs(s.Latency.P50), pl.System, fmtMs(pl.Result.Latency.P50)),
				})
			}
			continue
		}
		if p := pl.Result.jobsPerSec(); p > 0 {
			out = append(out, ratioLine{
				Name:  fmt.Sprintf("%s, skiplock / %s", pl.Result.Scenario, pl.System),
				Value: s.jobsPerSec() / p,
				Means: fmt.Sprintf("%.0f vs %.0f jobs/s", s.jobsPerSec(), p),
			})
		}
	}
	return out
}
