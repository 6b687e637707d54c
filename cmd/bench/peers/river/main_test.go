package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseFlags parses a command line as cmd/bench -peers river passes it.
func TestParseFlags(t *testing.T) {
	t.Parallel()
	args := strings.Fields("--database-url postgres://localhost/river_bench --scenarios steady,insert_bulk,steady " +
		"--jobs 2000 --workers 100 --producers 8 --latency-jobs 500 --latency-interval-ms 10 " +
		"--steady-duration-ms 1500.5 --rate 246.4 --warmup-ms 1000 --timeout-ms 600000 --fetch-cooldown-ms 2 --fetch-poll-interval-ms 20")
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.scenarios, []string{"steady", "insert_bulk"}) {
		t.Errorf("scenarios = %v", cfg.scenarios)
	}
	if cfg.steadyDuration != 1500500*time.Microsecond || cfg.fetchCooldown != 2*time.Millisecond ||
		cfg.fetchPollInterval != 20*time.Millisecond || cfg.batch != 1000 || cfg.pool != 20 || cfg.rate != 246.4 {
		t.Errorf("config %+v", cfg)
	}

	for _, bad := range [][]string{
		{"--database-url", "x", "--scenarios", "bloat"},
		{"--database-url", "x", "--latency-interval-ms", "-1"},
		{"--database-url", "x", "--jobs", "5"},
		{"--database-url", "", "--jobs", "100"},
		{"--database-url", "x", "--rate", "0"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
