package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

// FuzzNewClientConfig gives NewClient fuzzed Config fields. NewClient does no I/O, so the
// pool points nowhere. It must never panic; it either accepts the configuration or returns
// an *InvalidError naming a field the fuzzer set (a zero field means its default and is
// never the one at fault).
func FuzzNewClientConfig(f *testing.F) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(pool.Close)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(context.Context, *driver.Job[struct{}]) error { return nil }, nil)

	f.Fuzz(func(t *testing.T, queue string, slots, batchSize int, id string, lease, heartbeat, jobTimeout,
		poll, cooldown, requeue, shutdown, batchDelay int64, completeBatchSize int) {
		cfg := &driver.Config{
			Queues:             map[string]driver.QueueConfig{queue: {Slots: slots, BatchSize: batchSize}},
			Handlers:           hs,
			ID:                 id,
			Lease:              time.Duration(lease),
			HeartbeatInterval:  time.Duration(heartbeat),
			JobTimeout:         time.Duration(jobTimeout),
			PollInterval:       time.Duration(poll),
			FetchCooldown:      time.Duration(cooldown),
			RequeueInterval:    time.Duration(requeue),
			ShutdownTimeout:    time.Duration(shutdown),
			CompleteBatchDelay: time.Duration(batchDelay),
			CompleteBatchSize:  completeBatchSize,
		}
		set := map[string]bool{
			"Config.ID": id != "", "Config.Lease": lease != 0, "Config.HeartbeatInterval": heartbeat != 0,
			"Config.JobTimeout": jobTimeout != 0, "Config.PollInterval": poll != 0, "Config.FetchCooldown": cooldown != 0,
			"Config.RequeueInterval": requeue != 0, "Config.ShutdownTimeout": shutdown != 0,
			"Config.CompleteBatchDelay": batchDelay != 0, "Config.CompleteBatchSize": completeBatchSize != 0,
		}
		c, err := driver.NewClient(pool, cfg)
		if err == nil {
			if got := c.ID(); got == "" || len(got) > 200 || (id != "" && got != id) {
				t.Fatalf("client ID %q for Config.ID %q", got, id)
			}
			return
		}
		var ie *driver.InvalidError
		if !errors.As(err, &ie) {
			t.Fatalf("NewClient: %v (%T), want an *InvalidError", err, err)
		}
		field := ie.Field
		if strings.HasPrefix(field, "Config.Queues[") {
			// The queue's name, Slots or BatchSize; a bad name is reported as the queue.
			if queue != "" && len(queue) <= 200 && storable(queue) && !strings.HasSuffix(field, ".Slots") && !strings.HasSuffix(field, ".BatchSize") {
				t.Fatalf("NewClient blamed %s for the valid queue name %q: %v", field, queue, err)
			}
			return
		}
		if !set[field] {
			t.Fatalf("NewClient blamed %s, a field left at its default: %v", field, err)
		}
		if !strings.Contains(err.Error(), field) {
			t.Fatalf("error %q does not name %s", err, field)
		}
	})
}

// recorder is an Executor that records the one statement Enqueue sends and answers id 42.
type recorder struct {
	calls int
	args  []any
}

func (r *recorder) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	r.calls++
	return pgconn.CommandTag{}, errors.New("recorder: Exec not expected")
}

func (r *recorder) Query(context.Context, string, ...any) (pgx.Rows, error) {
	r.calls++
	return nil, errors.New("recorder: Query not expected")
}

func (r *recorder) QueryRow(_ context.Context, _ string, args ...any) pgx.Row {
	r.calls++
	r.args = args
	return idRow{}
}

type idRow struct{}

func (idRow) Scan(dest ...any) error {
	*dest[0].(*int64) = 42
	return nil
}

// FuzzEnqueueArgs calls Enqueue with a fuzzed kind, raw JSON payload and options against a
// recorder instead of a database. It must never panic. Options the SQL cannot judge (Go
// ranges, Delay with RunAt, JSON that does not parse) give an *InvalidError naming the field
// and send nothing; everything else is sent once, unchanged apart from the documented
// defaults, for jobs_enqueue to judge.
func FuzzEnqueueArgs(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind string, payload []byte, queue string, runAtUnixNano, delay, priority,
		maxAttempts int64, uniqueKey string) {
		opts := &driver.EnqueueOpts{Queue: queue, Delay: time.Duration(delay), Priority: int(priority),
			MaxAttempts: int(maxAttempts), UniqueKey: uniqueKey}
		if runAtUnixNano != 0 {
			opts.RunAt = time.Unix(0, runAtUnixNano)
		}
		// Enqueue marshals the payload, so a nil json.RawMessage is JSON null.
		valid := json.Valid(payload) || payload == nil
		rec := &recorder{}
		id, err := driver.Enqueue(context.Background(), rec, kind, json.RawMessage(payload), opts)
		if err != nil {
			var ie *driver.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Enqueue: %v (%T), want an *InvalidError", err, err)
			}
			if rec.calls != 0 {
				t.Fatalf("Enqueue refused %s (%v) but still called the database", ie.Field, err)
			}
			var bad bool
			switch ie.Field {
			case "Kind":
				bad = kind == "" || !storable(kind)
			case "EnqueueOpts.Queue":
				bad = !storable(queue)
			case "EnqueueOpts.UniqueKey":
				bad = !storable(uniqueKey)
			case "Payload":
				bad = !valid
			case "EnqueueOpts.Delay":
				bad = delay < 0 || (delay != 0 && runAtUnixNano != 0)
			case "EnqueueOpts.Priority":
				bad = priority < math.MinInt32 || priority > math.MaxInt32
			case "EnqueueOpts.MaxAttempts":
				bad = maxAttempts < 0 || maxAttempts > math.MaxInt32
			}
			if !bad {
				t.Fatalf("Enqueue blamed %q, which is fine: %v", ie.Field, err)
			}
			return
		}
		if id != 42 || rec.calls != 1 {
			t.Fatalf("Enqueue = %d after %d calls, want 42 from one call", id, rec.calls)
		}
		if kind == "" || !storable(kind) || !storable(queue) || !storable(uniqueKey) || !valid || delay < 0 || (delay != 0 && runAtUnixNano != 0) ||
			priority < math.MinInt32 || priority > math.MaxInt32 || maxAttempts < 0 || maxAttempts > math.MaxInt32 {
			t.Fatalf("Enqueue accepted kind %q, payload %q, delay %d with run_at %d, priority %d, max_attempts %d",
				kind, payload, delay, runAtUnixNano, priority, maxAttempts)
		}
		// The arguments must carry what was given: the kind, the payload (same JSON value),
		// the queue (default when empty), the key (NULL when empty).
		var sent []string
		for _, a := range rec.args {
			switch v := a.(type) {
			case string:
				sent = append(sent, v)
			case *string:
				if v != nil {
					sent = append(sent, *v)
				}
			case json.RawMessage:
				if want := payload; !sameJSON(v, want) && !(want == nil && string(v) == "null") {
					t.Fatalf("sent payload %q for %q", v, payload)
				}
			}
		}
		wantQueue := queue
		if wantQueue == "" {
			wantQueue = driver.QueueDefault
		}
		for _, want := range []string{kind, wantQueue, uniqueKey} {
			if want != "" && !slices.Contains(sent, want) {
				t.Fatalf("%q is not among the arguments sent: %q", want, sent)
			}
		}
	})
}

// storable reports whether s is acceptable to a PostgreSQL text parameter: valid UTF-8
// without NUL.
func storable(s string) bool { return utf8.ValidString(s) && !strings.Contains(s, "\x00") }

func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
