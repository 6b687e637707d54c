package pgtest

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// NewLogWriter returns a writer that passes each Write, less surrounding white space, to
// t.Log, for a logger or a child process's stderr. Writes made after the test has ended
// are dropped rather than passed on, because t.Log then panics; goroutines that outlive a
// test (a client shutting down, a reader of a killed child's stderr) may still write.
func NewLogWriter(t testing.TB) io.Writer {
	w := &logWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

type logWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
