// Command quickstart shows skiplock's Go driver end to end: it installs skiplock, signs up a
// user and enqueues two jobs in the same transaction, then works them with a client of two
// queues until SIGTERM or Ctrl-C.
//
//	DATABASE_URL=postgres://localhost/app go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/driver"
)

// WelcomeEmail and ResizeAvatar are job payloads, stored as JSON.
type WelcomeEmail struct {
	UserID int64  `json:"user_id"`
	Email  string `json:"email"`
}

type ResizeAvatar struct {
	UserID int64 `json:"user_id"`
	Size   int   `json:"size"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Getenv("DATABASE_URL")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string) error {
	// Install skiplock, or bring it up to date (idempotent).
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	err = skiplock.Migrate(ctx, conn, nil)
	conn.Close(ctx)
	if err != nil {
		return err
	}

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS users (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		email text NOT NULL,
		welcomed_at timestamptz)`); err != nil {
		return err
	}

	// Sign a user up and enqueue their jobs in one transaction: the user and the jobs
	// commit together, or none of them does.
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var userID int64
	if err := tx.QueryRow(ctx, "INSERT INTO users (email) VALUES ($1) RETURNING id", "ada@example.com").Scan(&userID); err != nil {
		return err
	}
	if _, err := driver.Enqueue(ctx, tx, "welcome_email",
		WelcomeEmail{UserID: userID, Email: "ada@example.com"}, &driver.EnqueueOpts{Queue: "mail"}); err != nil {
		return err
	}
	if _, err := driver.Enqueue(ctx, tx, "resize_avatar",
		ResizeAvatar{UserID: userID, Size: 256}, &driver.EnqueueOpts{Delay: time.Second}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}

	handlers := driver.NewHandlers()
	driver.AddHandler(handlers, "welcome_email", func(ctx context.Context, job *driver.Job[WelcomeEmail]) error {
		fmt.Printf("sending welcome email to %s (attempt %d)\n", job.Payload.Email, job.Attempt)
		// Record the work and complete the job in one transaction: exactly once.
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "UPDATE users SET welcomed_at = now() WHERE id = $1", job.Payload.UserID); err != nil {
			return err
		}
		if err := driver.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, nil)
	driver.AddHandler(handlers, "resize_avatar", func(ctx context.Context, job *driver.Job[ResizeAvatar]) error {
		fmt.Printf("resizing avatar of user %d to %dpx\n", job.Payload.UserID, job.Payload.Size)
		return nil // completed by the client, in a batch
	}, &driver.HandlerOpts{Timeout: 30 * time.Second})

	client, err := driver.NewClient(pool, &driver.Config{
		Queues: map[string]driver.QueueConfig{
			"default": {Slots: 10},
			"mail":    {Slots: 5},
		},
		Handlers: handlers,
	})
	if err != nil {
		return err
	}
	// Work the queues until SIGTERM or Ctrl-C, then shut down gracefully: stop claiming,
	// let running jobs finish, flush completions.
	fmt.Println("working; press Ctrl-C to stop")
	return client.Run(ctx)
}
