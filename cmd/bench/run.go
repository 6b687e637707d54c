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

	var results []*result
	byName := map[string]*result{}
	emit := func(res *result) error {
		results = append(results, res)
		byName[res.Scenario] = res
		addRatioFields(res, byName)
		if cfg.json {
			line, err := jsonLine("skiplock", e.version, res, e.commonFields())
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
		steps := []string{name}
		if name == "scale" {
			steps = nil
			for _, p := range cfg.scaleProcs {
				steps = append(steps, fmt.Sprintf("scale_%dp", p))
			}
		}
		for i, step := range steps {
			if err := e.resetSchema(ctx); err != nil {
				return fmt.Errorf("%s: %w", step, err)
			}
			logf("scenario %s: start", step)
			stepBegan := time.Now()
			var res *result
			switch name {
			case "insert_bulk":
				res, err = r.insertBulk(ctx)
			case "insert_single":
				res, err = r.insertSingle(ctx)
			case "work_drain":
				res, err = r.workDrain(ctx, "work_drain", 0)
			case "latency":
				res, err = r.latency(ctx)
			case "steady":
				res, err = r.steady(ctx, "steady", false)
			case "bloat":
				res, err = r.workDrain(ctx, "bloat", cfg.bloatRows)
			case "held_xmin":
				res, err = r.steady(ctx, "held_xmin", true)
			case "scale":
				res, err = r.scale(ctx, cfg.scaleProcs[i])
			case "naive":
				res, err = r.naive(ctx)
			case "chaos":
				res, err = r.chaos(ctx)
			default:
				err = fmt.Errorf("unknown scenario %q", name)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", step, err)
			}
			if l, ok := loadAverage(); ok {
				// Other work on the machine shows here: above the CPU count, expect noise.
				res.add("load_avg_1m", l)
				res.note("load %.1f", l)
			}
			logf("scenario %s: %.0f jobs/s (%d jobs in %.2fs; scenario took %s)", step, res.jobsPerSec(),
				res.Jobs, res.Seconds, time.Since(stepBegan).Round(time.Millisecond))
			e.pgssReport(ctx, step)
			if err := emit(res); err != nil {
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
	for _, p := range cfg.peers {
		lines, err := r.runPeer(ctx, p)
		if err != nil {
			logf("peer %s: %v", p, err) // a peer that cannot run here is reported, not fatal
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
	ratios := ratioLines(byName, cfg.scaleProcs)
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

// addRatioFields puts the side-by-side ratios on the JSON line of the later scenario of
// each pair.
func addRatioFields(res *result, byName map[string]*result) {
	var base, key, note string
	baseIsNumerator := false
	switch {
	case res.Scenario == "bloat":
		base, key, note = "work_drain", "ratio_to_work_drain", "%.2fx work_drain"
	case res.Scenario == "held_xmin":
		base, key, note = "steady", "ratio_to_steady", "%.2fx steady"
	case res.Scenario == "naive":
		base, key, note = "work_drain", "skiplock_work_drain_ratio", "skiplock work_drain is %.2fx this"
		baseIsNumerator = true
	case strings.HasPrefix(res.Scenario, "scale_") && res.Scenario != "scale_1p":
		base, key, note = "scale_1p", "ratio_to_1p", "%.2fx scale_1p"
	default:
		return
	}
	b, ok := byName[base]
	if !ok {
		return
	}
	num, den := res, b
	if baseIsNumerator {
		num, den = b, res
	}
	if den.jobsPerSec() <= 0 { // the ratio would be Inf or NaN, which JSON cannot encode
		return
	}
	v := round(num.jobsPerSec()/den.jobsPerSec(), 3)
	res.add(key, v)
	res.note(note, v)
}

// ratioLines lists the ratios of this run for the table.
func ratioLines(byName map[string]*result, scaleProcs []int) []ratioLine {
	var out []ratioLine
	pair := func(a, b, name, means string) {
		ra, okA := byName[a]
		rb, okB := byName[b]
		if okA && okB && rb.jobsPerSec() > 0 {
			out = append(out, ratioLine{name, ra.jobsPerSec() / rb.jobsPerSec(), means})
		}
	}
	pair("work_drain", "naive", "work_drain / naive", "skiplock vs the seed design (one job per transaction)")
	pair("bloat", "work_drain", "bloat / work_drain", "drain with -bloat-rows finished jobs in the table vs a clean table (1.00: no cost)")
	pair("held_xmin", "steady", "held_xmin / steady", "steady with a snapshot held open vs without (1.00: no cost)")
	for _, p := range scaleProcs {
		if p != 1 {
			pair(fmt.Sprintf("scale_%dp", p), "scale_1p", fmt.Sprintf("scale %dp / 1p", p), "drain with more worker processes")
		}
	}
	return out
}
