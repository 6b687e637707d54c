package driver

import (
	"context"
	"log/slog"
)

// requeueLoop calls jobs_requeue_expired every RequeueInterval (jittered), taking back the
// jobs of dead workers. It runs in its own goroutine until ctx is done.
func (c *Client) requeueLoop(ctx context.Context) {
	for sleepCtx(ctx, jitter(c.cfg.RequeueInterval, 0.25)) {
		qctx, cancel := context.WithTimeout(ctx, opTimeout)
		var n int
		err := c.pool.QueryRow(qctx, requeueExpiredSQL).Scan(&n)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			c.logger.Warn("failed to requeue expired jobs", slog.Any("error", err))
		case n > 0:
			c.logger.Info("requeued jobs whose lease expired", slog.Int("jobs", n))
		}
	}
}
