package chaos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/internal/pglocal"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	srv := &pglocal.Server{} // never started: withDefaults only checks it is there

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		o, err := (&Options{URL: "postgres://x/y", Server: srv}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if o.Jobs != JobsDefault || o.Workers != WorkersDefault || o.Slots != SlotsDefault || o.PoolConns != SlotsDefault+2 ||
			o.HogConns != SlotsDefault+2 || o.Kills != KillsDefault || o.TerminateRounds != TerminateRoundsDefault ||
			o.HeldXmin != HeldXminDefault || o.RowLock != RowLockDefault || o.Lease != LeaseDefault ||
			o.PollInterval != PollIntervalDefault || o.MaxAttempts != MaxAttemptsDefault || o.Seed == 0 ||
			o.Executable == "" || o.Logf == nil || o.WorkerLog == nil {
			t.Errorf("unexpected defaults: %+v", o)
		}
		if !slices.Equal(o.Restarts, []pglocal.StopMode{pglocal.StopFast, pglocal.StopImmediate}) {
			t.Errorf("Restarts = %v", o.Restarts)
		}
		if got, want := o.RecoveryBound(), LeaseDefault+PollIntervalDefault+RecoverySlack; got != want {
			t.Errorf("RecoveryBound = %s, want %s", got, want)
		}
	})

	t.Run("MinusOneDisables", func(t *testing.T) {
		t.Parallel()
		o, err := (&Options{URL: "u", Restarts: []pglocal.StopMode{}, Kills: -1, TerminateRounds: -1, HeldXmin: -1,
			RowLock: -1, HogFraction: -1, HangFraction: -1}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if o.Kills != 0 || o.TerminateRounds != 0 || o.HeldXmin != 0 || o.RowLock != 0 || o.HogFraction != 0 ||
			o.HangFraction != 0 || len(o.Restarts) != 0 {
			t.Errorf("faults left enabled: %+v", o)
		}
	})

	t.Run("ErrorsNameTheField", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			opts  Options
			field string
		}{
			{Options{}, "URL"},
			{Options{URL: "u"}, "Server"},
			{Options{URL: "u", Server: srv, Restarts: []pglocal.StopMode{"slow"}}, "Restarts"},
			{Options{URL: "u", Server: srv, Restarts: []pglocal.StopMode{pglocal.StopSmart}}, "Restarts"},
			{Options{URL: "u", Server: srv, Jobs: -5}, "Jobs"},
			{Options{URL: "u", Server: srv, Kills: -2}, "Kills"},
			{Options{URL: "u", Server: srv, Lease: 500 * time.Millisecond}, "Lease"},
			{Options{URL: "u", Server: srv, HeldXmin: -2}, "HeldXmin"},
			{Options{URL: "u", Server: srv, HogFraction: 0.6}, "HogFraction"},
			{Options{URL: "u", Server: srv, HogFraction: 0.3, HangFraction: 0.3}, "HogFraction"},
			{Options{URL: "u", Server: srv, PoolConns: 4, HogConns: 5}, "HogConns"},
			{Options{URL: "u", Server: srv, JobSleep: -1}, "JobSleep"},
			{Options{URL: "u", Server: srv, Keys: -1}, "Keys"},
			{Options{URL: "u", Server: srv, Keys: 1, HotKeyShare: 0.5}, "HotKeyShare"},
			{Options{URL: "u", Server: srv, Keys: 10, HotKeyShare: 1}, "HotKeyShare"},
			{Options{URL: "u", Server: srv, Concurrency: &Concurrency{Ordered: true}}, "Concurrency"},
			{Options{URL: "u", Server: srv, Keys: 10, Concurrency: &Concurrency{PerKey: -1}}, "Concurrency"},
		} {
			_, err := c.opts.withDefaults()
			if err == nil || !strings.Contains(err.Error(), "Options."+c.field) {
				t.Errorf("%+v: error %v does not name %s", c.opts, err, c.field)
			}
		}
	})
}

// The schedule is the seed's: the same seed plans the same faults in the same order.
func TestPlanFollowsSeed(t *testing.T) {
	t.Parallel()
	plan := func(seed uint64) []step {
		o, err := (&Options{URL: "u", Server: &pglocal.Server{}, Seed: seed}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		r := &runner{o: o, rng: rand.New(rand.NewPCG(seed, seed))}
		steps, unit, est := r.plan()
		if unit <= 0 || est < o.HeldXmin {
			t.Fatalf("unit %s, estimate %s", unit, est)
		}
		return steps
	}
	a, b, c := plan(1), plan(1), plan(2)
	if !slices.Equal(a, b) {
		t.Errorf("seed 1 planned %v, then %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2 planned the same schedule %v", a)
	}
	count := map[string]int{}
	for _, s := range a {
		count[s.kind]++
		if s.jitter < 0.5 || s.jitter > 1.5 {
			t.Errorf("jitter %g out of [0.5, 1.5]", s.jitter)
		}
	}
	want := map[string]int{faultKill: KillsDefault, faultTerminate: TerminateRoundsDefault, faultRowLock: 1,
		faultRestartFast: 1, faultRestartImmediate: 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d %s faults planned, want %d", count[k], k, n)
		}
	}
}

func TestReportErr(t *testing.T) {
	t.Parallel()
	ok := &Report{Jobs: 10, RecoverySeconds: 1, RecoveryBoundSeconds: 6}
	if err := ok.Err(); err != nil {
		t.Errorf("a clean report failed: %v", err)
	}
	if !strings.Contains(ok.String(), "PASS") {
		t.Errorf("a clean report does not say PASS:\n%s", ok)
	}
	bad := &Report{Jobs: 10, JobsLost: 1, JobsDoneTwice: 2, RecoverySeconds: 7, RecoveryBoundSeconds: 6,
		Violations: []string{"3 jobs still running at the end"}}
	err := bad.Err()
	for _, want := range []string{"1 jobs lost", "2 jobs done twice", "recovery took 7.00s", "still running"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if !strings.Contains(bad.String(), "FAIL") || !strings.Contains(bad.String(), "VIOLATION") {
		t.Errorf("a failed report does not say FAIL and VIOLATION:\n%s", bad)
	}

	// The per-key checks: a fair queue's per_key, an ordered queue's one at a time and order.
	fair := &Report{Jobs: 10, RecoveryBoundSeconds: 6, Keys: 5, PerKeyLimit: 2, MostRunningPerKey: 2}
	if err := fair.Err(); err != nil {
		t.Errorf("a fair run within per_key failed: %v", err)
	}
	fair.MostRunningPerKey, fair.KeysStuck = 3, 1
	err = fair.Err()
	for _, want := range []string{"3 jobs of one key ran at once, over per_key 2", "1 concurrency keys with jobs not done"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	unordered := &Report{Jobs: 10, RecoveryBoundSeconds: 6, Keys: 5, MostRunningPerKey: 3, OrderViolations: 7}
	if err := unordered.Err(); err != nil {
		t.Errorf("keys out of order on a queue that does not promise order failed the run: %v", err)
	}
	ordered := &Report{Jobs: 10, RecoveryBoundSeconds: 6, Keys: 5, Ordered: true, MostRunningPerKey: 1}
	if err := ordered.Err(); err != nil || !strings.Contains(ordered.String(), "most running per key 1 (no per_key limit, ordered)") {
		t.Errorf("a clean ordered run: error %v, report:\n%s", err, ordered)
	}
	ordered.MostRunningPerKey, ordered.OrderViolations = 2, 4
	err = ordered.Err()
	for _, want := range []string{"2 jobs of one key of an ordered queue ran at once", "4 attempts began before an earlier job of their key was done"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

// The jobs' concurrency keys: even over Keys, or a hot k0 holding the first HotKeyShare of
// them.
func TestKeyOf(t *testing.T) {
	t.Parallel()
	r := &runner{o: &Options{Jobs: 10, Keys: 3}}
	var got []string
	for i := range 10 {
		got = append(got, r.keyOf(i))
	}
	if want := []string{"k0", "k1", "k2", "k0", "k1", "k2", "k0", "k1", "k2", "k0"}; !slices.Equal(got, want) {
		t.Errorf("even keys %v, want %v", got, want)
	}
	r = &runner{o: &Options{Jobs: 10, Keys: 3, HotKeyShare: 0.5}}
	got = got[:0]
	for i := range 10 {
		got = append(got, r.keyOf(i))
	}
	if want := []string{"k0", "k0", "k0", "k0", "k0", "k1", "k2", "k1", "k2", "k1"}; !slices.Equal(got, want) {
		t.Errorf("hot keys %v, want %v", got, want)
	}
	if k := (&runner{o: &Options{Jobs: 10}}).keyOf(3); k != "" {
		t.Errorf("key %q without Keys", k)
	}
}
