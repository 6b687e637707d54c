package benchresult

import (
	"sync"
	"time"
)

// LatencyRecorder pairs each job's enqueue commit with its handler start, by job id. It is
// safe for concurrent use.
type LatencyRecorder struct {
	mu        sync.Mutex
	committed map[int64]time.Time
	started   map[int64]time.Time
}

// NewLatencyRecorder returns an empty recorder.
func NewLatencyRecorder() *LatencyRecorder {
	return &LatencyRecorder{committed: map[int64]time.Time{}, started: map[int64]time.Time{}}
}

// Commit records when the enqueue of job id was seen committed.
func (l *LatencyRecorder) Commit(id int64, at time.Time) {
	l.mu.Lock()
	l.committed[id] = at
	l.mu.Unlock()
}

// Start records when the handler of job id started; a retry's later start is ignored.
func (l *LatencyRecorder) Start(id int64, at time.Time) {
	l.mu.Lock()
	if _, ok := l.started[id]; !ok {
		l.started[id] = at
	}
	l.mu.Unlock()
}

// Latencies returns handler start minus commit for every job that has both and started
// no later than until (the zero time: whenever). A handler can start before the
// enqueueing goroutine sees its commit acknowledged; such values are counted in negative
// and clamped to zero.
func (l *LatencyRecorder) Latencies(until time.Time) (d []time.Duration, negative int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, c := range l.committed {
		s, ok := l.started[id]
		if !ok || (!until.IsZero() && s.After(until)) {
			continue
		}
		v := s.Sub(c)
		if v < 0 {
			negative++
			v = 0
		}
		d = append(d, v)
	}
	return d, negative
}
