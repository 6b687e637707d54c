package driver_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// Example enqueues a job and runs a client that handles it. (exampleDB stands in for your
// own database, where skiplock.Migrate has installed skiplock.)
func Example() {
	ctx := context.Background()
	url, drop := exampleDB()
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	type Greeting struct {
		Name string `json:"name"`
	}
	handled := make(chan struct{})
	handlers := driver.NewHandlers()
	driver.AddHandler(handlers, "greet", func(ctx context.Context, job *driver.Job[Greeting]) error {
		fmt.Printf("hello, %s (attempt %d)\n", job.Payload.Name, job.Attempt)
		close(handled)
		return nil
	}, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:   map[string]driver.QueueConfig{driver.QueueDefault: {Slots: 10}},
		Handlers: handlers,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	go func() {
		if err := client.Run(ctx); err != nil {
			panic(err)
		}
	}()

	if _, err := driver.Enqueue(ctx, pool, "greet", Greeting{Name: "Ada"}, nil); err != nil {
		panic(err)
	}
	<-handled
	if err := client.Stop(ctx); err != nil {
		panic(err)
	}
	// Output: hello, Ada (attempt 1)
}

// ExampleCompleteTx makes a handler's database work and the job's completion one
// transaction, so the work happens exactly once even if the worker crashes or loses its
// lease.
func ExampleCompleteTx() {
	ctx := context.Background()
	url, drop := exampleDB()
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE payments (order_id bigint PRIMARY KEY, amount numeric NOT NULL)"); err != nil {
		panic(err)
	}

	type Charge struct {
		OrderID int64  `json:"order_id"`
		Amount  string `json:"amount"`
	}
	handlers := driver.NewHandlers()
	driver.AddHandler(handlers, "charge", func(ctx context.Context, job *driver.Job[Charge]) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO payments VALUES ($1, $2)", job.Payload.OrderID, job.Payload.Amount); err != nil {
			return err
		}
		if err := driver.CompleteTx(ctx, tx, job); err != nil {
			return err // ErrNotHeld: another attempt owns the job now; roll back
		}
		return tx.Commit(ctx)
	}, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:   map[string]driver.QueueConfig{"payments": {Slots: 4}},
		Handlers: handlers,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(runCtx) }()

	id, err := driver.Enqueue(ctx, pool, "charge", Charge{OrderID: 42, Amount: "9.99"}, &driver.EnqueueOpts{Queue: "payments"})
	if err != nil {
		panic(err)
	}
	var state string
	for state != "done" {
		time.Sleep(10 * time.Millisecond)
		if err := pool.QueryRow(ctx, "SELECT state FROM jobs_get($1)", id).Scan(&state); err != nil {
			panic(err)
		}
	}
	stop() // cancelling Run's context shuts the client down
	if err := <-runErr; err != nil {
		panic(err)
	}
	var amount string
	if err := pool.QueryRow(ctx, "SELECT amount::text FROM payments WHERE order_id = 42").Scan(&amount); err != nil {
		panic(err)
	}
	fmt.Println("job", state, "and order 42 charged", amount)
	// Output: job done and order 42 charged 9.99
}

// exampleDB makes a fresh database with skiplock installed, on the test server of pgtest,
// and returns its URL and a function that drops it.
func exampleDB() (string, func()) {
	tb := &exampleTB{}
	return pgtest.NewDatabase(tb), tb.cleanup
}

// exampleTB is the part of testing.TB that pgtest needs, for examples, which have no *testing.T.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (*exampleTB) Helper()                   {}
func (*exampleTB) Name() string              { return "example" }
func (tb *exampleTB) Cleanup(f func())       { tb.cleanups = append(tb.cleanups, f) }
func (*exampleTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (*exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (*exampleTB) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (*exampleTB) Skipf(f string, a ...any)  { panic(fmt.Sprintf(f, a...)) }

func (tb *exampleTB) cleanup() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
}
