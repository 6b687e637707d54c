package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
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
	var peerLines []peerLine
	var summaries []stepSummary
	systems := []string{"skiplock"}
	for _, p := range prepared {
		systems = append(systems, p.name)
	}

	began := time.Now()
	for _, name := range cfg.scenarios {
		s := scenarioNamed(name)
		var mine []preparedPeer // the prepared peers that run s
		for _, p := range prepared {
			if slices.Contains(s.peers, p.name) {
				mine = append(mine, p)
			}
		}
		rounds := cfg.roundsFor(s)
		steps := s.stepsOf(cfg)
		var per []*roundResults
		if rounds > 1 {
			sys := []string{"skiplock"}
			for _, p := range mine {
				sys = append(sys, p.name)
			}
			for _, step := range steps {
				per = append(per, newRoundResults(step, rounds, sys))
			}
		}
		r.arrivalRate = cfg.arrivalRate(summaries, byName)
		var peerNames []string
		for _, p := range mine {
			peerNames = append(peerNames, p.name)
		}
		err := alternate(rounds, peerNames, func(round int, system string) error {
			if system == "skiplock" {
				for i, step := range steps {
					if err := e.resetSchema(ctx); err != nil {
						return fmt.Errorf("%s: %w", step, err)
					}
					logf("scenario %s: start%s", step, roundNote(round, rounds))
					stepBegan := time.Now()
					res, err := s.run(ctx, r, i)
					if err != nil {
						return fmt.Errorf("%s: %w", step, err)
					}
					if rounds > 1 {
						res.Round = round
						res.Add("round", round)
						res.note("round %d/%d", round, rounds)
						per[i].set("skiplock", round, res)
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
				return nil
			}
			p := mine[slices.IndexFunc(mine, func(p preparedPeer) bool { return p.name == system })]
			lines, err := r.runPeer(ctx, p, name)
			if err != nil {
				logf("peer %s: %v", p.name, err) // a peer that cannot run here is reported, not fatal
			}
			for _, pl := range lines {
				if rounds > 1 {
					pl.Raw = withRound(pl.Raw, round)
					pl.Result.note("round %d/%d", round, rounds)
					for _, rr := range per {
						if rr.step == pl.Result.Scenario {
							rr.set(pl.System, round, pl.Result)
						}
					}
				}
				if cfg.json {
					if _, err := out.Write(append(pl.Raw, '\n')); err != nil {
						return err
					}
				}
				peerLines = append(peerLines, pl)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if rounds == 1 && len(mine) > 0 {
			// One pass: the summary is of one round, so the ratios section has the peers' ratios.
			for i, step := range steps {
				rr := newRoundResults(step, 1, systems)
				rr.set("skiplock", 1, results[len(results)-len(steps)+i])
				per = append(per, rr)
			}
			for _, pl := range peerLines {
				for _, rr := range per {
					if rr.step == pl.Result.Scenario && rr.results[pl.System] != nil && rr.results[pl.System][0] == nil {
						rr.set(pl.System, 1, pl.Result)
					}
				}
			}
		}
		for _, rr := range per {
			sum := rr.summarize(s.peerLatency)
			summaries = append(summaries, sum)
			if m := medianRound(rr.results["skiplock"]); rounds > 1 && m != nil {
				// The later scenarios' ratios to this step (bloat / work_drain…) take its
				// median round as their baseline, not whichever round came last.
				byName[rr.step] = m
			}
			if cfg.json && rounds > 1 {
				line, err := summaryLine(sum)
				if err != nil {
					return err
				}
				if _, err := out.Write(line); err != nil {
					return err
				}
			}
		}
	}
	if !cfg.keepSchema {
		if err := e.dropSchema(ctx); err != nil {
			logf("failed to drop schema %s: %v", cfg.schema, err)
		}
	}
	logf("scenarios took %s", time.Since(began).Round(time.Second))

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
	ratios := append(ratioLines(cfg, results, byName), summaryRatioLines(summaries)...)
	if err := writeTable(out, results, ratios); err != nil {
		return err
	}
	if len(peerLines) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "peers (same server, each scenario right after skiplock's, a fresh database each):")
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
	var multi []stepSummary
	for _, s := range summaries {
		if s.Rounds > 1 {
			multi = append(multi, s)
		}
	}
	return writeSummaries(out, multi, systems)
}

// alternate runs the rounds of one scenario, round by round, each round skiplock first and
// then each of peers in order: A B C A B C …, so that the systems' figures of one round are
// taken within minutes of each other. It stops at the first error of run.
func alternate(rounds int, peers []string, run func(round int, system string) error) error {
	for round := 1; round <= rounds; round++ {
		for _, system := range append([]string{"skiplock"}, peers...) {
			if err := run(round, system); err != nil {
				return err
			}
		}
	}
	return nil
}

// roundNote is " (round i/n)" when a scenario runs in rounds, else "".
func roundNote(round, rounds int) string {
	if rounds == 1 {
		return ""
	}
	return fmt.Sprintf(" (round %d/%d)", round, rounds)
}

// withRound adds "round":round to a harness's JSON line (a JSON object).
func withRound(line []byte, round int) []byte {
	return withFields(line, []benchresult.Field{{Key: "round", Value: round}})
}

// withFields adds fields at the end of a harness's JSON line (a JSON object).
func withFields(line []byte, fields []benchresult.Field) []byte {
	i := bytes.LastIndexByte(line, '}')
	if i < 0 {
		return line
	}
	out := slices.Clone(line[:i])
	for _, f := range fields {
		k, _ := json.Marshal(f.Key)
		v, err := json.Marshal(f.Value)
		if err != nil {
			continue
		}
		out = fmt.Appendf(out, ",%s:%s", k, v)
	}
	return append(out, '}')
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
