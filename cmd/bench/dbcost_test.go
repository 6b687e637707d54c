package main

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestDrainCosts: on a throwaway server, skiplock's drain and the River harness's (through
// its cost marks) both report the server's CPU and WAL per job, and the deferred work has
// run: neither system's finished jobs are left in its table.
func TestDrainCosts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, builds the River harness and drains on both")
	}
	ctx := t.Context()
	cfg, err := parseFlags([]string{"-scenarios", "work_drain", "-jobs", "2000", "-peers", "river", "-rounds", "1"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e, err := openEnv(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	r := &runner{e: e, cfg: cfg, arrivalRate: defaultArrivalRate}
	if err := e.resetSchema(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := r.workDrain(ctx, "work_drain", cfg.workers, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkCost := func(system string, c *costPerJob, raw []byte) {
		t.Helper()
		if c == nil || !c.cpuKnown || c.cpuMicros <= 0 || c.walBytes <= 0 {
			t.Errorf("%s: cost %+v", system, c)
		}
		for _, key := range []string{`"server_cpu_us_per_job":`, `"server_wal_bytes_per_job":`, `"deferred_cpu_us_per_job":`} {
			if !bytes.Contains(raw, []byte(key)) {
				t.Errorf("%s: no %s in %s", system, key, raw)
			}
		}
	}
	line, err := res.JSONLine("skiplock", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkCost("skiplock", res.cost, line)
	left := func(url, query string) int64 {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int64
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := left(e.url, "SELECT count(*) FROM "+cfg.schema+".jobs"); n != 0 {
		t.Errorf("skiplock: %d jobs left after the deferred prune", n)
	}

	prepared, err := preparePeers(ctx, cfg)
	if err != nil || len(prepared) != 1 {
		t.Fatalf("river harness: %v (%d prepared)", err, len(prepared))
	}
	lines, err := r.runPeer(ctx, prepared[0], "work_drain")
	if err != nil || len(lines) != 1 {
		t.Fatalf("river: %v (%d lines)", err, len(lines))
	}
	checkCost("river", lines[0].Result.cost, lines[0].Raw)
	if n := left(e.server.URLFor(prepared[0].database), "SELECT count(*) FROM river_job"); n != 0 {
		t.Errorf("river: %d jobs left after the deferred prune", n)
	}
}
