package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// listenerPingInterval is how long the listener waits for a notification before checking
// that its connection is still alive; a connection that died silently (no TCP reset) would
// otherwise leave the client on polling alone.
const listenerPingInterval = 30 * time.Second

// errListenerPooled reports that the LISTEN connection made from the pool's configuration
// goes through a connection pooler, where LISTEN cannot be relied on.
var errListenerPooled = errors.New("the pool's connections go through a connection pooler (their backend process id " +
	"differs from pg_backend_pid()), where LISTEN does not keep a session; set Config.ListenerURL to a direct connection")

// listen runs the client's LISTEN connection in its own goroutine until ctx is done. Each
// notification wakes the fetch loop of its queue. When the connection fails it logs, backs
// off, reconnects and listens again, then wakes every fetch loop, since notifications sent
// meanwhile are lost; polling covers the gap. With LISTEN disabled, or when the connection
// made from the pool's configuration turns out to go through a pooler, it logs that the
// client polls and returns.
func (c *Client) listen(ctx context.Context) {
	if c.cfg.DisableListen {
		c.logPolling(slog.LevelInfo, "Config.DisableListen is set")
		return
	}
	var b backoff
	for {
		err := c.listenOnce(ctx, &b)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errListenerPooled) {
			c.logPolling(slog.LevelWarn, err.Error())
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
	// Connecting, the pooler check and LISTEN share one timeout, so that a connection that
	// hangs during set-up is given up and made again.
	sctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(sctx, c.listenCfg)
	if err != nil {
		return fmt.Errorf("failed to connect listener: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	// A pooler answers for the server with its own backend key data, so the process id it
	// gave differs from the server's. Simple protocol: no prepared statement to lose.
	var serverPID uint32
	if err := conn.QueryRow(sctx, backendPIDSQL, pgx.QueryExecModeSimpleProtocol).Scan(&serverPID); err != nil {
		return fmt.Errorf("failed to query listener connection: %w", err)
	}
	pooled := serverPID != conn.PgConn().PID()
	if pooled && c.cfg.ListenerURL == "" {
		return errListenerPooled
	}
	if _, err := conn.Exec(sctx, listenSQL); err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	cancel() // set-up done
	b.reset()
	via := "pool's configuration"
	if c.cfg.ListenerURL != "" {
		via = "Config.ListenerURL"
	}
	if pooled {
		c.logger.Warn("the LISTEN connection (Config.ListenerURL) goes through a connection pooler: " +
			"notifications arrive only if it keeps one server session (PgBouncer's pool_mode = session)")
	}
	c.logger.Info("listening for wake-ups on "+notifyChannel, slog.String("listener", via))
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

// logPolling says, once at start, that the client does not listen and how often it polls.
func (c *Client) logPolling(level slog.Level, reason string) {
	c.logger.Log(context.Background(), level, "LISTEN disabled: polling every "+c.cfg.PollInterval.String(),
		slog.Duration("poll_interval", c.cfg.PollInterval), slog.String("reason", reason))
}
