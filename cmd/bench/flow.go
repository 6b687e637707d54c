package main

// The fair and ordered scenarios drain a queue shaped by jobs_set_concurrency's fair and
// ordered settings, and watch every handler start and return to report what the shaping
// did: how soon the small keys got their turn beside a key holding most of the jobs (fair),
// and whether any key ever ran two jobs at once or a job before an earlier one of its key
// (ordered).

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// flowKeys is the number of concurrency keys of the fair and ordered scenarios.
const flowKeys = 1000

// fairHotShare is the share of the fair scenario's jobs that its one big key holds.
const fairHotShare = 0.9

// fairFirstStarts is how many of the first starts the fair scenario's hot_key_share_first
// counts.
const fairFirstStarts = 1000

// setLimits sets the bench queue's concurrency settings to l's; the zero drainLimits removes
// them (fair and ordered false switch those off; NULL would leave them as they are).
func setLimits(ctx context.Context, pool *pgxpool.Pool, l *drainLimits) error {
	if _, err := pool.Exec(ctx, `SELECT jobs_set_concurrency(queue => $1, max_running => nullif($2, 0),
		per_key => nullif($3, 0), fair => $4, ordered => $5)`,
		benchQueue, l.maxRunning, l.perKey, l.fair, l.ordered); err != nil {
		return fmt.Errorf("failed to set the queue's concurrency settings: %w", err)
	}
	return nil
}

// keyWatch records, for a drain of keyed jobs, the order the handlers started in and how
// many jobs of each key ran at once. Its methods run in the handlers, concurrently.
type keyWatch struct {
	keyOf map[int64]int32 // job id -> key index (the number after "k")

	mu         sync.Mutex
	order      []int32         // key index of each start, in start order
	at         []time.Duration // time of each start since the workers started
	running    []int32         // by key: handlers running now
	mostPerKey int32           // most handlers of one key running at once
	lastID     []int64         // by key: the id of its latest start
	outOfOrder int             // starts of a job with a lower id than an earlier start of its key
}

// newKeyWatch reads the key of each of the n queued jobs (keys "k0" … "k<keys-1>").
func newKeyWatch(ctx context.Context, pool *pgxpool.Pool, keys, n int) (*keyWatch, error) {
	rows, err := pool.Query(ctx, "SELECT id, concurrency_key FROM jobs WHERE state = 'queued'")
	if err != nil {
		return nil, fmt.Errorf("failed to read the jobs' keys: %w", err)
	}
	defer rows.Close()
	w := &keyWatch{
		keyOf:   make(map[int64]int32, n),
		order:   make([]int32, 0, n),
		at:      make([]time.Duration, 0, n),
		running: make([]int32, keys),
		lastID:  make([]int64, keys),
	}
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			return nil, fmt.Errorf("failed to read the jobs' keys: %w", err)
		}
		k, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
		if err != nil || k < 0 || k >= keys {
			return nil, fmt.Errorf("job %d has concurrency key %q, not one of k0…k%d", id, key, keys-1)
		}
		w.keyOf[id] = int32(k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to read the jobs' keys: %w", err)
	}
	if len(w.keyOf) != n {
		return nil, fmt.Errorf("found %d queued jobs, expected %d", len(w.keyOf), n)
	}
	return w, nil
}

// started records the start of job id's handler; began is when the workers started.
func (w *keyWatch) started(id int64, began time.Time) {
	k, ok := w.keyOf[id]
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ok {
		k = -1
	}
	w.order = append(w.order, k)
	w.at = append(w.at, time.Since(began))
	if !ok {
		return
	}
	w.running[k]++
	w.mostPerKey = max(w.mostPerKey, w.running[k])
	if id < w.lastID[k] {
		w.outOfOrder++
	}
	w.lastID[k] = max(w.lastID[k], id)
}

// returned records the return of job id's handler.
func (w *keyWatch) returned(id int64) {
	if k, ok := w.keyOf[id]; ok {
		w.mu.Lock()
		w.running[k]--
		w.mu.Unlock()
	}
}

// flowFigures are what a keyWatch saw of a drain.
type flowFigures struct {
	mostRunningPerKey int
	orderViolations   int
	// Of the fair scenario, with key 0 the hot one: the start (1-based) of the last job of
	// the other keys, its time, the hot key's starts before it, and the hot key's share of
	// the first fairFirstStarts starts.
	lastColdStart      int
	lastColdAt         time.Duration
	hotBeforeLastCold  int
	hotShareFirstStart float64
	unknownStarts      int
}

func (w *keyWatch) figures() flowFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := flowFigures{mostRunningPerKey: int(w.mostPerKey), orderViolations: w.outOfOrder}
	hot, first := 0, min(fairFirstStarts, len(w.order))
	for i, k := range w.order {
		switch {
		case k < 0:
			f.unknownStarts++
		case k == 0:
			hot++
			if i < first {
				f.hotShareFirstStart++
			}
		default:
			f.lastColdStart, f.lastColdAt, f.hotBeforeLastCold = i+1, w.at[i], hot
		}
	}
	if first > 0 {
		f.hotShareFirstStart /= float64(first)
	}
	return f
}

// report adds what the watch saw to res: for every watched drain the most handlers of one
// key running at once and the starts out of id order within a key; for a drain with a hot
// key, when the other keys' last job started.
func (w *keyWatch) report(res *result, l *drainLimits, seconds float64) {
	f := w.figures()
	res.Add("most_running_per_key", f.mostRunningPerKey)
	res.Add("order_violations", f.orderViolations)
	if f.unknownStarts > 0 {
		res.Add("unknown_starts", f.unknownStarts)
	}
	res.note("most running per key %d", f.mostRunningPerKey)
	if l.ordered {
		res.note("order violations %d", f.orderViolations)
	}
	if l.hotShare > 0 && f.lastColdStart > 0 {
		n := len(w.order)
		res.Add("cold_last_start", f.lastColdStart)
		res.Add("cold_last_start_share", benchresult.Round(float64(f.lastColdStart)/float64(n), 3))
		res.Add("cold_last_start_seconds", benchresult.Round(f.lastColdAt.Seconds(), 3))
		res.Add("hot_starts_before_cold_done", f.hotBeforeLastCold)
		res.Add("hot_share_first_starts", benchresult.Round(f.hotShareFirstStart, 3))
		res.note("other keys' last job started %d of %d (%.1fs of %.1fs), after %d of k0's",
			f.lastColdStart, n, f.lastColdAt.Seconds(), seconds, f.hotBeforeLastCold)
		res.note("k0 %.0f%% of the first %d starts", 100*f.hotShareFirstStart, min(fairFirstStarts, n))
	}
}
