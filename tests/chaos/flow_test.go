package chaos_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/skiplock/skiplock/internal/chaos"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// flowChaos runs the chaos suite on a queue shaped by cc, its jobs over keys concurrency
// keys (hot: the share of key k0, enqueued first): 3 kills, 2 terminate rounds, hog and hang
// jobs (a hanging job's failed first attempt waits for its retry, holding an ordered key),
// and with restart an immediate restart of a server of its own. It checks what
// internal/chaos checks, the per-key rules of cc among them (no key stuck, per_key, order),
// and that the faults found jobs in flight.
func flowChaos(t *testing.T, jobs, keys int, hot float64, cc *chaos.Concurrency, restart bool) *chaos.Report {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a chaos run takes half a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var url string
	var srv *pglocal.Server
	restarts := []pglocal.StopMode{}
	if restart {
		// A server of its own (pgtest's shared one must not restart), migrated afresh.
		srv = pgtest.NewServer(t)
		admin := pgtest.NewConn(t, srv.URL())
		if _, err := admin.Exec(ctx, "CREATE DATABASE chaos"); err != nil {
			t.Fatal(err)
		}
		url = srv.URLFor("chaos")
		migrate(t, url)
		restarts = []pglocal.StopMode{pglocal.StopImmediate}
	} else {
		url = pgtest.NewDatabase(t)
	}

	began := time.Now()
	rep, err := chaos.Run(ctx, &chaos.Options{
		URL:             url,
		Server:          srv,
		Jobs:            jobs,
		Workers:         2,
		Slots:           8,
		Kills:           3,
		Restarts:        restarts,
		TerminateRounds: 2,
		HeldXmin:        -1,
		RowLock:         -1,
		Keys:            keys,
		HotKeyShare:     hot,
		Concurrency:     cc,
		Seed:            seed(t),
		Logf:            t.Logf,
		WorkerLog:       pgtest.NewLogWriter(t),
	})
	if rep != nil {
		t.Logf("chaos report (%s in all):\n%s", time.Since(began).Round(time.Second), rep)
		b, _ := json.Marshal(rep)
		t.Logf("json: %s", b)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkStorage(t, url)
	if rep.Kills != 3 || rep.OrphansRequeued == 0 || rep.Restarts != len(restarts) || rep.ListenersTerminated == 0 {
		t.Errorf("the run had %d kills orphaning %d jobs, %d restarts, %d LISTEN connections terminated; want 3 kills that orphaned jobs, %d restarts, listeners terminated",
			rep.Kills, rep.OrphansRequeued, rep.Restarts, rep.ListenersTerminated, len(restarts))
	}
	if rep.Keys != keys || rep.MostRunningPerKey == 0 {
		t.Errorf("the report checked %d keys and saw at most %d jobs of a key running; want %d keys and some running",
			rep.Keys, rep.MostRunningPerKey, keys)
	}
	return rep
}

// TestChaosFair runs the chaos suite on a fair queue with per_key 8 (of 16 slots), one key
// holding 30% of the 1,000 jobs, enqueued first, and the rest spread over 59 others: nothing
// lost or done twice, every key's jobs all done after the kills, and never more than 8 jobs
// of a key running at once. (The hot key's share and per_key set how long its jobs outlast
// the others', and so the run: the faults spread over the drain.) No restart: TestChaosOrdered
// has one.
func TestChaosFair(t *testing.T) {
	rep := flowChaos(t, 1000, 60, 0.3, &chaos.Concurrency{PerKey: 8, Fair: true}, false)
	if rep.MostRunningPerKey != 8 {
		// The hot key has work throughout: it should reach its limit, and never pass it.
		t.Errorf("at most %d jobs of one key ran at once; want the hot key at per_key 8", rep.MostRunningPerKey)
	}
}

// TestChaosOrdered runs the chaos suite on an ordered queue, 800 jobs over 40 keys (20 each,
// enqueued interleaved), an immediate restart among the faults: nothing lost or done twice,
// every key's jobs all done after the kills, never two jobs of a key running at once, and no
// attempt of a job begun before every earlier job of its key was done; a job run again after
// its lease expired is the same job.
func TestChaosOrdered(t *testing.T) {
	rep := flowChaos(t, 800, 40, 0, &chaos.Concurrency{Ordered: true}, true)
	if rep.MostRunningPerKey != 1 || rep.OrderViolations != 0 || rep.KeysStuck != 0 {
		t.Errorf("most running per key %d, %d order violations, %d keys stuck; want 1, 0, 0",
			rep.MostRunningPerKey, rep.OrderViolations, rep.KeysStuck)
	}
}

// TestChaosCatchesDisorder runs keyed jobs, 5 keys of 40, on a queue without settings and
// without faults: 16 slots run the jobs of a key side by side and finish them out of order,
// and the report must count both, as it would on an ordered queue that broke its promise.
// A suite that found nothing here could not be trusted to catch anything in
// TestChaosOrdered.
func TestChaosCatchesDisorder(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a chaos run takes seconds")
	}
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, &chaos.Options{
		URL:             url,
		Jobs:            200,
		Workers:         2,
		Slots:           8,
		Kills:           -1,
		Restarts:        []pglocal.StopMode{},
		TerminateRounds: -1,
		HeldXmin:        -1,
		RowLock:         -1,
		HogFraction:     -1,
		HangFraction:    -1,
		Keys:            5,
		Seed:            seed(t),
		Logf:            t.Logf,
	})
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	t.Logf("chaos report:\n%s", rep)
	if err != nil {
		t.Fatalf("a run with nothing promised per key failed: %v", err)
	}
	if rep.MostRunningPerKey < 2 || rep.OrderViolations == 0 {
		t.Errorf("most running per key %d, %d order violations: the checks missed jobs of a key running side by side and out of order",
			rep.MostRunningPerKey, rep.OrderViolations)
	}
	if err := (&chaos.Report{Jobs: rep.Jobs, RecoveryBoundSeconds: 1, Keys: rep.Keys, Ordered: true,
		MostRunningPerKey: rep.MostRunningPerKey, OrderViolations: rep.OrderViolations}).Err(); err == nil {
		t.Error("the same figures on an ordered queue did not fail the run")
	}
}
