package main

import (
	"errors"
	"flag"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// namesFlag matches the errors that name a flag: the flag package's, which quote whatever
// was given ("flag provided but not defined: -0"), and parseFlags' own ("-jobs must be ...",
// "-scale-procs: ...").
var namesFlag = regexp.MustCompile(`^(flag provided but not defined: |flag needs an argument: |invalid (boolean )?value .* for (flag )?-|bad flag syntax: )|(^|[\s:])-[a-z][a-z-]*[\s:]`)

// FuzzParseFlags parses fuzzed command lines: argv is the argument list joined with NUL
// bytes (which real arguments cannot contain), databaseURL what $DATABASE_URL holds. For
// every call:
//
//   - parseFlags never panics, and returns a config or an error, never both;
//   - a returned config passes validate again, its scenarios are known, distinct and in run
//     order, its scale-procs distinct, sorted and in 1..64, its peers known and distinct;
//   - an error other than -help names a flag (or the stray argument, or the unknown
//     scenario or peer).
//
// In a plain `go test` run only the seed corpus (testdata/fuzz/FuzzParseFlags) runs; fuzz
// it with scripts/fuzz.
func FuzzParseFlags(f *testing.F) {
	f.Fuzz(func(t *testing.T, argv, databaseURL string) {
		var args []string
		if argv != "" {
			args = strings.Split(argv, "\x00")
		}
		getenv := func(k string) string {
			if k == "DATABASE_URL" {
				return databaseURL
			}
			return ""
		}
		cfg, err := parseFlags(args, getenv, io.Discard)
		if err != nil {
			if cfg != nil {
				t.Fatalf("parseFlags(%q) returned a config and the error %v", args, err)
			}
			msg := err.Error()
			if !errors.Is(err, flag.ErrHelp) && !namesFlag.MatchString(msg) &&
				!strings.HasPrefix(msg, "unexpected argument ") && !strings.HasPrefix(msg, "unknown scenario ") &&
				!strings.HasPrefix(msg, "unknown peer ") {
				t.Fatalf("parseFlags(%q): error %q names no flag", args, msg)
			}
			return
		}
		if cfg == nil {
			t.Fatalf("parseFlags(%q) returned neither a config nor an error", args)
		}
		if err := cfg.validate(); err != nil {
			t.Fatalf("parseFlags(%q) returned a config that fails validate: %v", args, err)
		}
		if len(cfg.scenarios) == 0 {
			t.Fatalf("parseFlags(%q): no scenarios", args)
		}
		last := -1
		for _, s := range cfg.scenarios {
			i := slices.Index(scenarioOrder(), s)
			if i <= last {
				t.Fatalf("parseFlags(%q): scenarios %v are unknown, repeated or out of run order", args, cfg.scenarios)
			}
			last = i
		}
		if len(cfg.scaleProcs) == 0 || !slices.IsSorted(cfg.scaleProcs) || len(slices.Compact(slices.Clone(cfg.scaleProcs))) != len(cfg.scaleProcs) ||
			cfg.scaleProcs[0] < 1 || cfg.scaleProcs[len(cfg.scaleProcs)-1] > 64 {
			t.Fatalf("parseFlags(%q): scale-procs %v", args, cfg.scaleProcs)
		}
		for i, p := range cfg.peers {
			if !slices.Contains(knownPeers, p) || slices.Contains(cfg.peers[:i], p) {
				t.Fatalf("parseFlags(%q): peers %v", args, cfg.peers)
			}
		}
	})
}
