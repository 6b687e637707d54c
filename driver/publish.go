package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// PublishOpts are the options of the jobs a [Publish] adds, the same for each of them. A nil
// *PublishOpts, like the zero value, means every default: ready now, priority 0,
// MaxAttemptsDefault attempts, no concurrency key, no meta. The queue and kind of each job are
// its subscription's.
type PublishOpts struct {
	// RunAt is when the jobs become ready. Defaults to the zero time, meaning now (the
	// database's clock) plus Delay.
	RunAt time.Time

	// Delay makes the jobs ready this long after the database's current time; it cannot be
	// combined with RunAt. Defaults to 0, ready now.
	Delay time.Duration

	// Priority orders the jobs among the ready jobs of their queues, as
	// EnqueueOpts.Priority. Defaults to 0.
	Priority int

	// MaxAttempts is how many attempts each job gets before it is dead. Defaults to
	// MaxAttemptsDefault.
	MaxAttempts int

	// ConcurrencyKey groups the jobs for their queues' per-key concurrency limits, as
	// EnqueueOpts.ConcurrencyKey. 1 to 200 bytes. Defaults to "" (no key).
	ConcurrencyKey string

	// Meta is stored with each job for tools, as EnqueueOpts.Meta. Defaults to nil (NULL).
	Meta map[string]string
}

// Publish adds one job per subscription of topic (jobs_publish; subscriptions are managed
// with the admin package's Subscribe and Unsubscribe, or `skiplock topic subscribe`): a job
// of the subscription's kind in its queue, with this payload and opts. It returns their ids
// in the order of the subscriptions by queue, then kind; a topic without subscribers returns
// an empty, non-nil slice and adds nothing. The jobs are those of the subscriptions committed
// when the call's statement started, all of one moment.
//
// Pass the caller's pgx.Tx as db to publish atomically with the caller's own writes: the jobs
// exist only if the transaction commits, and workers are woken only then. Publish notifies
// inline, once per queue that got a job ready now, through any Executor: it takes no part in
// the notify throttle of [EnqueueOpts].NotifyCooldown, since only the database knows which
// queues a topic reaches. Bad options give an *InvalidError naming the field.
func Publish(ctx context.Context, db Executor, topic string, payload any, opts *PublishOpts) ([]int64, error) {
	if opts == nil {
		opts = &PublishOpts{}
	}
	invalid := func(field, format string, args ...any) error {
		return &InvalidError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if topic == "" {
		return nil, invalid("Topic", "must not be empty")
	}
	for _, f := range []struct{ field, value string }{{"Topic", topic}, {"PublishOpts.ConcurrencyKey", opts.ConcurrencyKey}} {
		if problem := storableTextError(f.value); problem != "" {
			return nil, invalid(f.field, "%s", problem)
		}
	}
	body := json.RawMessage("{}")
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, invalid("Payload", "cannot be encoded as JSON: %v", err)
		}
		body = b
	}
	var runAt *time.Time
	if !opts.RunAt.IsZero() {
		if opts.Delay != 0 {
			return nil, invalid("PublishOpts.Delay", "cannot be combined with RunAt")
		}
		t := opts.RunAt
		runAt = &t
	}
	if opts.Delay < 0 {
		return nil, invalid("PublishOpts.Delay", "must not be negative, got %s", opts.Delay)
	}
	if opts.Priority < math.MinInt32 || opts.Priority > math.MaxInt32 {
		return nil, invalid("PublishOpts.Priority", "must fit in 32 bits, got %d", opts.Priority)
	}
	maxAttempts := int32(MaxAttemptsDefault)
	switch {
	case opts.MaxAttempts == 0:
	case opts.MaxAttempts < 1 || opts.MaxAttempts > math.MaxInt32:
		return nil, invalid("PublishOpts.MaxAttempts", "must be at least 1 (0 means %d), got %d", MaxAttemptsDefault, opts.MaxAttempts)
	default:
		maxAttempts = int32(opts.MaxAttempts)
	}
	var concurrencyKey *string
	if opts.ConcurrencyKey != "" {
		k := opts.ConcurrencyKey
		concurrencyKey = &k
	}
	var meta json.RawMessage
	if opts.Meta != nil {
		b, err := json.Marshal(opts.Meta)
		if err != nil {
			return nil, invalid("PublishOpts.Meta", "cannot be encoded as JSON: %v", err)
		}
		meta = b
	}
	ids := []int64{}
	if err := db.QueryRow(ctx, publishSQL, topic, body, runAt, opts.Delay, int32(opts.Priority), maxAttempts,
		concurrencyKey, []byte(meta)).Scan(&ids); err != nil {
		return nil, fmt.Errorf("failed to publish to topic %q: %w", topic, sqlInvalid(err))
	}
	if ids == nil {
		ids = []int64{}
	}
	return ids, nil
}
