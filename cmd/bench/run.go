package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// run benchmarks skiplock (and the peers, with -peers) and reports to out.
func run(ctx context.Context, cfg *config, out io.Writer) (err error) {
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("failed to create the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("failed to start the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	e, err := openEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.close()
	r := &runner{e: e, cfg: cfg}
	logf("%s", e.settingsLine())
	// Before skiplock's scenarios, so that a missing harness or tool shows at once.
	prepared, err := preparePeers(ctx, cfg)
	if err != nil {
		return err
	}

	var results []*result
	byName := map[string]*result{}
	emit := func(s *scenario, res *result) error {
		results = append(results, res)
		byName[res.Scenario] = res
		addRatioFields(s, res, byName)
		if cfg.json {
			line, err := res.JSONLine("skiplock", e.version, e.commonFields())
			if err != nil {
				return err
			}
			_, err = out.Write(line)
			return err
		}
		return nil
	}

	began := time.Now()
	for _, name := range cfg.scenarios {
		s := scenarioNamed(name)
		for i, step := range s.stepsOf(cfg) {
			if err := e.resetSchema(ctx); err != nil {
				return fmt.Errorf("%s: %w", step, err)
			}
			logf("scenario %s: start", step)
			stepBegan := time.Now()
			res, err := s.run(ctx, r, i)
			if err != nil {
				return fmt.Errorf("%s: %w", step, err)
			}
			if l, ok := loadAverage(); ok {
				// Other work on the machine shows here: above the CPU count, expect noise.
				res.Add("load_avg_1m", l)
				res.note("load %.1f", l)
			}
			logf("scenario %s: %.0f jobs/s (%d jobs in %.2fs; scenario took %s)", step, res.JobsPerSec(),
				res.Jobs, res.Seconds, time.Since(stepBegan).Round(time.Millisecond))
			e.pgssReport(ctx, step)
			if err := emit(s, res); err != nil {
				return err
			}
		}
	}
	if !cfg.keepSchema {
		if err := e.dropSchema(ctx); err != nil {
			logf("failed to drop schema %s: %v", cfg.schema, err)
		}
	}
	logf("skiplock scenarios took %s", time.Since(began).Round(time.Second))

	var peerLines []peerLine
	for _, p := range prepared {
		lines, err := r.runPeer(ctx, p)
		if err != nil {
			logf("peer %s: %v", p.name, err) // a peer that cannot run here is reported, not fatal
		}
		for _, pl := range lines {
			if cfg.json {
				if _, err := out.Write(append(pl.Raw, '\n')); err != nil {
					return err
				}
			}
		}
		peerLines = append(peerLines, lines...)
	}

	if cfg.plot != "" {
		if err := writePlot(cfg.plot, results, "skiplock bench, "+time.Now().Format("2006-01-02 15:04")); err != nil {
			return err
		}
		logf("wrote %s", cfg.plot)
	}
	if cfg.json {
		return nil
	}

	fmt.Fprintln(out, e.settingsLine())
	fmt.Fprintln(out)
	ratios := ratioLines(cfg, results)
	for _, p := range cfg.peers {
		var mine []peerLine
		for _, pl := range peerLines {
			if pl.System == p {
				mine = append(mine, pl)
			}
		}
		ratios = append(ratios, peerRatios(byName, mine)...)
	}
	if err := writeTable(out, results, ratios); err != nil {
		return err
	}
	if len(peerLines) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "peers (same server, run one at a time after skiplock):")
		var rs []*result
		for _, pl := range peerLines {
			res := *pl.Result
			res.Scenario = pl.System + " " + pl.Version + " " + res.Scenario
			rs = append(rs, &res)
		}
		if err := writeTable(out, rs, nil); err != nil {
			return err
		}
	}
	return nil
}

// loadAverage is the machine's 1-minute load average, where /proc/loadavg exists.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}
