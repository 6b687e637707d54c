package driver

import (
	"context"
	"log/slog"
	"time"
)

// heartbeatLoop extends the leases of the client's running jobs every HeartbeatInterval,
// in its own goroutine until ctx is done (after the jobs have finished, at shutdown). A
// failed heartbeat is retried after a short backoff rather than a full interval.
func (c *Client) heartbeatLoop(ctx context.Context) {
	interval := c.cfg.HeartbeatInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	var hb heartbeater
	var b backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := hb.beat(ctx, c); err != nil && ctx.Err() == nil {
			c.logger.Warn("failed to heartbeat running jobs; retrying", slog.Any("error", err))
			t.Reset(min(b.next(), interval))
			continue
		}
		b.reset()
		t.Reset(interval)
	}
}

// heartbeater holds the buffers of one heartbeat, reused from beat to beat.
type heartbeater struct {
	exs      []*execution
	ids      []int64
	attempts []int32
	held     map[int64]bool // id -> extended, for the jobs still held
}

// beat sends one jobs_heartbeat_many for the running jobs whose lease ends within two
// intervals (jobs claimed since the last beat still have most of theirs), and cancels the
// context of every job the database says is no longer held, with cause ErrNotHeld. A job
// held but not extended (its row locked by another session) keeps its old lease, so it is
// in the next beat again.
func (hb *heartbeater) beat(ctx context.Context, c *Client) error {
	interval := c.cfg.HeartbeatInterval
	horizon := time.Now().Add(2 * interval).UnixNano()
	hb.exs, hb.ids, hb.attempts = hb.exs[:0], hb.ids[:0], hb.attempts[:0]
	for _, fl := range c.queueOrder {
		fl.mu.Lock()
		for _, ex := range fl.running {
			if ex.leaseUntil.Load() < horizon {
				hb.exs = append(hb.exs, ex)
				hb.ids = append(hb.ids, ex.row.ID)
				hb.attempts = append(hb.attempts, int32(ex.row.Attempt))
			}
		}
		fl.mu.Unlock()
	}
	defer clear(hb.exs)
	if len(hb.exs) == 0 {
		return nil
	}
	if hb.held == nil {
		hb.held = make(map[int64]bool)
	}
	clear(hb.held)

	sent := time.Now()
	qctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	rows, err := c.pool.Query(qctx, heartbeatManySQL, hb.ids, hb.attempts, c.cfg.Lease)
	if err != nil {
		return err
	}
	var id int64
	var extended bool
	for rows.Next() {
		if err := rows.Scan(&id, &extended); err != nil {
			rows.Close()
			return err
		}
		hb.held[id] = extended
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	leaseUntil := sent.Add(c.cfg.Lease).UnixNano()
	for _, ex := range hb.exs {
		if extended, ok := hb.held[ex.row.ID]; ok {
			if extended {
				ex.leaseUntil.Store(leaseUntil)
			} else {
				// Another session has the job's row locked; the lease stays as it was, and the
				// job is in the next beat again. After CompleteTx that session is usually the
				// handler's own transaction, about to commit: nothing to warn about.
				level := slog.LevelWarn
				if ex.completedInTx.Load() {
					level = slog.LevelDebug
				}
				c.logger.Log(ctx, level, "job lease not extended: another session holds a lock on its row; retrying at the next heartbeat",
					slog.Int64("job_id", ex.row.ID), slog.String("kind", ex.row.Kind), slog.Int("attempt", ex.row.Attempt))
			}
			continue
		}
		if ex.ctx.Err() == nil {
			c.logger.Info("job no longer held; cancelling its handler",
				slog.Int64("job_id", ex.row.ID), slog.String("kind", ex.row.Kind), slog.Int("attempt", ex.row.Attempt))
		}
		ex.cancel(ErrNotHeld)
	}
	return nil
}
