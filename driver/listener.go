package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel is the channel the SQL functions NOTIFY, with the queue name as payload,
// when a job becomes ready now.
const notifyChannel = "jobs_ready"

// listenerPingInterval is how long the listener waits for a notification before checking
// that its connection is still alive; a connection that died silently (no TCP reset) would
// otherwise leave the client on polling alone.
const listenerPingInterval = 30 * time.Second

// listen runs the client's LISTEN connection in its own goroutine until ctx is done. Each
// notification wakes the fetch loop of its queue. When the connection fails it logs, backs
// off, reconnects and listens again, then wakes every fetch loop, since notifications sent
// meanwhile are lost; polling covers the gap.
func (c *Client) listen(ctx context.Context) {
	var b backoff
	for {
		err := c.listenOnce(ctx, &b)
		if ctx.Err() != nil {
			return
		}
		c.logger.Warn("notification listener failed; reconnecting", slog.Any("error", err))
		if !sleepCtx(ctx, b.next()) {
			return
		}
	}
}

// listenOnce connects, listens and dispatches notifications until the connection fails or
// ctx is done.
func (c *Client) listenOnce(ctx context.Context, b *backoff) error {
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	conn, err := pgx.ConnectConfig(cctx, c.listenCfg)
	cancel()
	if err != nil {
		return fmt.Errorf("failed to connect listener: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	b.reset()
	c.wakeAll()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenerPingInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			c.notify(n.Payload)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, opTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("failed to ping listener connection: %w", err)
			}
		default:
			return fmt.Errorf("failed to wait for notification: %w", err)
		}
	}
}
