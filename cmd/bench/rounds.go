package main

import (
	"math"
	"time"
)

// Peer-run defaults: with -peers, every scenario the peers run too runs -rounds times for
// each of three systems, so a full `go run ./cmd/bench -peers river,graphile-worker` would
// take about half an hour at the single-pass defaults. These defaults keep it near ten
// minutes on a 2-core machine; a flag given on the command line wins.
const (
	peerRunJobs           = 20000
	peerRunSteadyDuration = 5 * time.Second
	peerRunLatencyJobs    = 200
)

// applyPeerRunDefaults puts the peer-run defaults in place of the flags not given.
func (c *config) applyPeerRunDefaults(given map[string]bool) {
	if !given["jobs"] {
		c.jobs = peerRunJobs
	}
	if !given["steady-duration"] {
		c.steadyDuration = peerRunSteadyDuration
	}
	if !given["latency-jobs"] {
		c.latencyJobs = peerRunLatencyJobs
	}
}

// roundsFor is how many rounds s runs: -rounds for a scenario of the peers when -peers is
// given, and for every scenario when -rounds is; else one.
func (c *config) roundsFor(s *scenario) int {
	if c.roundsGiven {
		return c.rounds
	}
	for _, p := range c.peers {
		for _, sp := range s.peers {
			if p == sp {
				return c.rounds
			}
		}
	}
	return 1
}

// arrivalRate is steady_rate's rate: -rate, else half the lower of skiplock's work_drain
// and insert_single jobs/s so far in this run (the medians of their rounds), both being
// capacities of the system (jobs worked, and jobs enqueued one per transaction, per
// second), so that the schedule stays below either; else defaultArrivalRate. sums are the
// summaries of the scenarios run so far, byName the latest result of each step.
func (c *config) arrivalRate(sums []stepSummary, byName map[string]*result) float64 {
	if c.rate > 0 {
		return c.rate
	}
	capacity := math.Inf(1)
	for _, step := range []string{"work_drain", "insert_single"} {
		v, ok := 0.0, false
		for _, s := range sums {
			if s.Step == step && len(s.Systems) > 0 && s.Systems[0].System == "skiplock" {
				v, ok = s.Systems[0].JobsPerSec.Median, true
			}
		}
		if res, ran := byName[step]; !ok && ran {
			v, ok = res.JobsPerSec(), true
		}
		if ok && v > 0 {
			capacity = min(capacity, v)
		}
	}
	if math.IsInf(capacity, 1) {
		return defaultArrivalRate
	}
	return capacity / 2
}
