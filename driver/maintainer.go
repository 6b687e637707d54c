package driver

import (
	"context"
	"log/slog"
)

// maintainLoop calls jobs_maintain every RequeueInterval (jittered): it takes back the jobs
// of dead workers and deletes finished jobs past the retention of jobs_settings. Every
// client runs it, without a leader: jobs_maintain lets one session at a time do a round
// and returns ran = false to the others, so no work is done twice. While a round says more
// (a prune hit its batch size) the next one follows at once, so retention keeps up with
// any completion rate. It runs in its own goroutine until ctx is done.
func (c *Client) maintainLoop(ctx context.Context) {
	for sleepCtx(ctx, jitter(c.cfg.RequeueInterval, 0.25)) {
		for ctx.Err() == nil && c.maintainRound(ctx) {
		}
	}
}

// maintainRound runs one jobs_maintain round and reports whether another should follow at
// once.
func (c *Client) maintainRound(ctx context.Context) (more bool) {
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var (
		ran                                               bool
		requeued, prunedDone, prunedCancelled, prunedDead int32
	)
	err := c.pool.QueryRow(qctx, maintainSQL).Scan(&ran, &requeued, &prunedDone, &prunedCancelled, &prunedDead, &more)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.logger.Warn("failed to run jobs_maintain", slog.Any("error", err))
		}
		return false
	case !ran:
		return false
	}
	if requeued > 0 {
		c.logger.Info("requeued jobs whose lease expired", slog.Int("jobs", int(requeued)))
	}
	if prunedDone+prunedCancelled+prunedDead > 0 {
		c.logger.Debug("pruned finished jobs past their retention", slog.Int("done", int(prunedDone)),
			slog.Int("cancelled", int(prunedCancelled)), slog.Int("dead", int(prunedDead)))
	}
	return more
}
