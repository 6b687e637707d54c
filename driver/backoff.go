package driver

import (
	"context"
	"math/rand/v2"
	"time"
)

// Retry delays after a failed database call: doubling from backoffMin up to backoffMax,
// with jitter so that the clients of a restarted server do not reconnect in step.
const (
	backoffMin = 50 * time.Millisecond
	backoffMax = 2 * time.Second
)

// opTimeout bounds each database call of the driver, so that a connection that hangs (a
// network partition rather than a refused connection) is given up and retried.
const opTimeout = 10 * time.Second

// backoff yields growing, jittered delays; the zero value starts at backoffMin.
type backoff struct{ failures int }

func (b *backoff) next() time.Duration {
	d := backoffMin << min(b.failures, 10)
	if d > backoffMax {
		d = backoffMax
	}
	b.failures++
	return jitter(d, 0.25)
}

func (b *backoff) reset() { b.failures = 0 }

// jitter returns d changed by a random fraction of at most frac either way.
func jitter(d time.Duration, frac float64) time.Duration {
	return time.Duration(float64(d) * (1 + frac*(2*rand.Float64()-1)))
}

// sleepCtx waits for d or until ctx is done; it reports whether the full time passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
