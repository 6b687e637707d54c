package main

import (
	"testing"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

func TestDrainLimitsKeyOf(t *testing.T) {
	t.Parallel()
	even := &drainLimits{keys: 4}
	for seq, want := range []int{0, 1, 2, 3, 0, 1} {
		if got := even.keyOf(seq, 6); got != want {
			t.Errorf("even keyOf(%d) = %d, want %d", seq, got, want)
		}
	}
	// fair's shape: k0 holds 90% of the jobs, enqueued first; the rest cycle through the
	// other keys.
	hot := &drainLimits{keys: flowKeys, hotShare: fairHotShare}
	const n = 50000
	perKey := make([]int, flowKeys)
	last0 := -1
	for seq := range n {
		k := hot.keyOf(seq, n)
		perKey[k]++
		if k == 0 {
			last0 = seq
		}
	}
	if perKey[0] != 45000 || hot.hotJobs(n) != 45000 || last0 != 44999 {
		t.Errorf("k0 holds %d jobs (hotJobs %d), its last is job %d; want 45000, all first", perKey[0], hot.hotJobs(n), last0)
	}
	for k := 1; k < flowKeys; k++ {
		if perKey[k] < 5 || perKey[k] > 6 {
			t.Fatalf("key %d holds %d jobs, want 5 or 6 (5,000 over 999 keys)", k, perKey[k])
		}
	}
}

func TestKeyWatch(t *testing.T) {
	t.Parallel()
	newWatch := func(keyOf map[int64]int32, keys int) *keyWatch {
		return &keyWatch{keyOf: keyOf, running: make([]int32, keys), lastID: make([]int64, keys)}
	}
	began := time.Now()

	// Ordered: key 0 has jobs 1, 3; key 1 has 2, 4. Job 3 starts before job 1 of its key,
	// and jobs 2 and 4 of key 1 run at once.
	w := newWatch(map[int64]int32{1: 0, 2: 1, 3: 0, 4: 1}, 2)
	w.started(3, began)
	w.returned(3)
	w.started(1, began)
	w.returned(1)
	w.started(2, began)
	w.started(4, began)
	w.returned(2)
	w.returned(4)
	w.started(99, began) // not a job of the drain
	f := w.figures()
	if f.orderViolations != 1 || f.mostRunningPerKey != 2 || f.unknownStarts != 1 {
		t.Errorf("figures %+v, want 1 order violation, most running per key 2, 1 unknown start", f)
	}

	// Fair: k0 hot. Starts: k0, k1, k0, k2, k0, k0: the last cold start is the 4th, after 2 of k0's.
	w = newWatch(map[int64]int32{1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 2}, 3)
	for _, id := range []int64{1, 5, 2, 6, 3, 4} {
		w.started(id, began)
		w.returned(id)
	}
	f = w.figures()
	if f.lastColdStart != 4 || f.hotBeforeLastCold != 2 || f.hotShareFirstStart != 4.0/6 || f.orderViolations != 0 || f.mostRunningPerKey != 1 {
		t.Errorf("figures %+v, want last cold start 4 after 2 hot, hot share 4/6, no violation, 1 running per key", f)
	}
	res := &result{Result: benchresult.Result{Scenario: "fair", Jobs: 6, Seconds: 1}}
	w.report(res, &drainLimits{fair: true, keys: 3, hotShare: 0.66}, 1)
	want := map[string]any{"most_running_per_key": 1, "order_violations": 0, "cold_last_start": 4,
		"cold_last_start_share": 0.667, "hot_starts_before_cold_done": 2, "hot_share_first_starts": 0.667}
	for _, e := range res.Extra {
		if v, ok := want[e.Key]; ok {
			if e.Value != v {
				t.Errorf("%s = %v, want %v", e.Key, e.Value, v)
			}
			delete(want, e.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("fields missing from the result: %v", want)
	}
}
