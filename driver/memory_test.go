package driver_test

import (
	"testing"
	"time"
)

// A client with 1,000 idle slots is small: it pre-spawns nothing per slot.
func TestIdleMemory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hp := startHelper(t, "idle", b.url, "idle", 1000, 5*time.Second)
	waitUntil(t, 20*time.Second, "the idle client listening", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})
	time.Sleep(time.Second) // a few poll rounds
	kb := rssKB(t, hp.Pid())
	hp.stop(t)
	limit := 50 * 1024
	if raceEnabled {
		limit *= 4 // the race detector's shadow memory
	}
	t.Logf("idle client with 1000 slots: RSS %d kB (race detector: %v)", kb, raceEnabled)
	if kb > limit {
		t.Fatalf("RSS %d kB, want at most %d kB", kb, limit)
	}
}
