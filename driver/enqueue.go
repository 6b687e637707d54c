package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Executor runs SQL: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx all are one. Enqueueing
// through the caller's pgx.Tx makes the job part of that transaction: it exists only if the
// transaction commits, and workers are woken only then.
//
// Enqueues through a *pgxpool.Pool share this process's notify throttle (see
// [EnqueueOpts].NotifyCooldown): the driver commits them itself, so it can wake the workers
// of a queue once per cooldown rather than at every commit. Enqueues through a pgx.Tx or a
// *pgx.Conn (or any other Executor) always notify inline, in the caller's transaction: the
// driver does not see when a pgx.Tx commits, and cannot use a *pgx.Conn from another
// goroutine to send a deferred notification.
type Executor interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EnqueueOpts are a job's options. A nil *EnqueueOpts, like the zero value, means every
// default: queue QueueDefault, ready now, priority 0, MaxAttemptsDefault attempts, no unique
// key, no concurrency key, no meta.
type EnqueueOpts struct {
	// Queue is the queue the job goes to, 1 to 200 bytes. Defaults to QueueDefault.
	Queue string

	// RunAt is when the job becomes ready. Defaults to the zero time, meaning now (the
	// database's clock) plus Delay.
	RunAt time.Time

	// Delay makes the job ready this long after the database's current time; it cannot be
	// combined with RunAt. Defaults to 0, ready now.
	Delay time.Duration

	// Priority orders ready jobs of a queue: lower values are claimed first, then earlier
	// run_at, then lower id. Defaults to 0.
	Priority int

	// MaxAttempts is how many attempts the job gets before it is dead. Defaults to
	// MaxAttemptsDefault.
	MaxAttempts int

	// UniqueKey, when set, makes the enqueue a no-op returning the existing job's id while a
	// job with the same queue and key is waiting, queued or running (see OnDuplicate and
	// UniqueFor for the other rules). 1 to 200 bytes. Defaults to "" (no key).
	UniqueKey string

	// OnDuplicate is what the enqueue does when UniqueKey is taken by a live job:
	// DuplicateKeep returns that job's id and changes nothing; DuplicateReplace gives a
	// waiting or queued job this enqueue's payload, run time (RunAt or Delay), Priority and
	// MaxAttempts and returns its id (debounce: Delay with DuplicateReplace), and inserts
	// this job after a running one (which then never runs again: see jobs_enqueue), so the
	// key has at most one queued job. DuplicateReplace needs a UniqueKey. Defaults to ""
	// (DuplicateKeep).
	OnDuplicate string

	// UniqueFor keeps UniqueKey taken for this long after the job finished (done, dead or
	// cancelled): meanwhile an enqueue of the key returns the finished job's id, so a job of
	// the key starts at most once per UniqueFor (throttle). Needs a UniqueKey; at most 100
	// years. Defaults to 0: the key is free as soon as the job finished.
	UniqueFor time.Duration

	// ConcurrencyKey groups jobs of a queue for the queue's per-key concurrency limit
	// (jobs_set_concurrency's per_key): at most per_key jobs with the same key run at once,
	// across every worker. 1 to 200 bytes. Defaults to "" (no key: the job counts against
	// the queue's max_running only).
	ConcurrencyKey string

	// Meta is stored with the job for tools rather than for its handler (jobs_enqueue's
	// meta, a JSON object of strings): the OpenTelemetry package (contrib/otel) keeps the
	// trace context there. The worker sees it as JobRow.Meta. Defaults to nil (NULL).
	Meta map[string]string

	// NotifyCooldown throttles the wake-ups of the job's queue when db is a
	// *pgxpool.Pool. PostgreSQL makes the commits of notifying transactions go one at a
	// time (a cluster-wide lock held across the WAL flush), so the first such enqueue of a
	// queue notifies inline and opens a window of NotifyCooldown; the enqueues of that
	// queue inside the window pass notify => false, and when it ends the process sends one
	// jobs_notify for the queue, in a transaction of its own, if any of them returned
	// (on a connection of its own if the pool was closed meanwhile). An
	// idle worker so hears of the job within NotifyCooldown (and a round trip) of the
	// enqueue's return, and a busy queue gets one notification per NotifyCooldown. The window's length is set by
	// the enqueue that opens it. Ignored for a pgx.Tx or *pgx.Conn (they notify inline) and
	// for jobs not ready now. -1 means this enqueue notifies inline and opens no window.
	// Defaults to NotifyCooldownDefault.
	NotifyCooldown time.Duration

	// DependsOn lists the job's parents: the job is waiting until every one of them is done,
	// then queued (RunAt still applies) in the transaction of the last completion, and its
	// handler finds their results in JobRow.ParentResults. A parent that ends dead or
	// cancelled cancels the job, unless OnParentFailure is ParentFailureRun. The parents must
	// exist (on the same shard). Not supported by [EnqueueMany]; see also [EnqueueWorkflow].
	// Defaults to nil: no parents.
	DependsOn []int64

	// OnParentFailure is what a parent ending dead or cancelled does to the job:
	// ParentFailureCancel or ParentFailureRun. Defaults to "" (ParentFailureCancel).
	OnParentFailure string

	// NotifyFinished makes the job NOTIFY jobs_finished with its id when it becomes done,
	// dead or cancelled, so that [WaitResult] (and any LISTENer) hears of it at once rather
	// than at its next poll. Defaults to false: other completions stay off PostgreSQL's
	// NOTIFY lock.
	NotifyFinished bool
}

// The values of EnqueueOpts.OnDuplicate.
const (
	// DuplicateKeep returns the live job holding the key, unchanged.
	DuplicateKeep = "keep"
	// DuplicateReplace changes the waiting or queued job holding the key in place, or
	// inserts the job after a running one.
	DuplicateReplace = "replace"
)

// The values of EnqueueOpts.OnParentFailure and WorkflowStep.OnParentFailure.
const (
	// ParentFailureCancel cancels the job when a parent ends dead or cancelled (and its own
	// children, down the graph); jobs_retry of the parent brings them back to waiting.
	ParentFailureCancel = "cancel"
	// ParentFailureRun treats a parent that ended dead or cancelled as done.
	ParentFailureRun = "run"
)

// EnqueueParams is one job of [EnqueueMany].
type EnqueueParams struct {
	// Kind selects the handler; see [AddHandler]. 1 to 200 bytes.
	Kind string

	// Payload is encoded with encoding/json; nil is stored as {}. A json.RawMessage is
	// stored as it is.
	Payload any

	// Opts are the job's options; nil means the defaults.
	Opts *EnqueueOpts
}

// Enqueue adds a job of the given kind and returns its id (with a UniqueKey held by a live
// job, that job's id). Pass the caller's pgx.Tx as db to enqueue atomically with the
// caller's own writes. Workers are woken (NOTIFY jobs_ready) when the job is ready now and
// db's transaction commits, or through a *pgxpool.Pool within the queue's NotifyCooldown.
// Bad options give an *InvalidError naming the field; so does text PostgreSQL would refuse
// (bytes that are not valid UTF-8, or NUL) in the kind, Queue, UniqueKey or ConcurrencyKey.
func Enqueue(ctx context.Context, db Executor, kind string, payload any, opts *EnqueueOpts) (int64, error) {
	a, err := enqueueArgs(kind, payload, opts, "")
	if err != nil {
		return 0, err
	}
	notify := true
	if pool, ok := db.(*pgxpool.Pool); ok && a.readyNow() {
		if joined, skip := processNotifyThrottle.skip(pool, []string{a.queue}, []time.Duration{a.notifyCooldown}); skip {
			notify = false
			defer processNotifyThrottle.done(joined)
		}
	}
	var id int64
	if err := db.QueryRow(ctx, enqueueSQL, a.kind, a.payload, a.queue, a.runAt, a.delay, a.priority,
		a.maxAttempts, a.uniqueKey, a.concurrencyKey, []byte(a.meta), notify, a.dependsOn, a.onParentFailure,
		a.notifyFinished, a.onDuplicate, a.uniqueFor).Scan(&id); err != nil {
		return 0, fmt.Errorf("failed to enqueue job: %w", sqlInvalid(err))
	}
	return id, nil
}

// EnqueueMany adds many jobs in one round trip (one jobs_enqueue_many call, at most 100000
// jobs) and returns their ids in the order of jobs. It is all or nothing: one bad job fails
// the call and adds none. Workers get one wake-up per queue (through a *pgxpool.Pool, the
// call notifies inline unless every queue with a job ready now has a notify window open,
// as for [Enqueue]). Pass the caller's pgx.Tx as db to enqueue atomically with the caller's
// own writes.
func EnqueueMany(ctx context.Context, db Executor, jobs []EnqueueParams) ([]int64, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	n := len(jobs)
	kinds := make([]string, n)
	payloads := make([]json.RawMessage, n)
	queues := make([]string, n)
	runAts := make([]*time.Time, n)
	delays := make([]time.Duration, n)
	priorities := make([]int32, n)
	maxAttempts := make([]int32, n)
	uniqueKeys := make([]*string, n)
	concurrencyKeys := make([]*string, n)
	metas := make([]json.RawMessage, n)
	onDuplicates := make([]string, n)
	uniqueFors := make([]*time.Duration, n)
	var anyQueue, anyTime, anyPriority, anyMaxAttempts, anyKey, anyConcurrencyKey, anyMeta bool
	var anyOnDuplicate, anyUniqueFor bool
	pool, throttled := db.(*pgxpool.Pool)
	var readyQueues []string           // distinct queues with a job ready now, for the throttle
	var readyCooldowns []time.Duration // each one's NotifyCooldown (-1 if any job's is)
	for i := range jobs {
		a, err := enqueueArgs(jobs[i].Kind, jobs[i].Payload, jobs[i].Opts, "EnqueueParams["+strconv.Itoa(i)+"].")
		if err != nil {
			return nil, err
		}
		kinds[i], payloads[i], queues[i], runAts[i], delays[i] = a.kind, a.payload, a.queue, a.runAt, a.delay
		priorities[i], maxAttempts[i], uniqueKeys[i] = a.priority, a.maxAttempts, a.uniqueKey
		concurrencyKeys[i], metas[i] = a.concurrencyKey, a.meta
		onDuplicates[i], uniqueFors[i] = a.onDuplicate, a.uniqueFor
		anyOnDuplicate = anyOnDuplicate || a.onDuplicate != DuplicateKeep
		anyUniqueFor = anyUniqueFor || a.uniqueFor != nil
		anyQueue = anyQueue || a.queue != QueueDefault
		anyTime = anyTime || a.runAt != nil || a.delay != 0
		anyPriority = anyPriority || a.priority != 0
		anyMaxAttempts = anyMaxAttempts || a.maxAttempts != MaxAttemptsDefault
		anyKey = anyKey || a.uniqueKey != nil
		anyConcurrencyKey = anyConcurrencyKey || a.concurrencyKey != nil
		anyMeta = anyMeta || a.meta != nil
		if throttled && a.readyNow() {
			j := slices.Index(readyQueues, a.queue)
			if j < 0 {
				readyQueues = append(readyQueues, a.queue)
				readyCooldowns = append(readyCooldowns, a.notifyCooldown)
			} else if a.notifyCooldown < 0 {
				readyCooldowns[j] = a.notifyCooldown
			}
		}
	}
	notify := true
	if len(readyQueues) > 0 {
		if joined, skip := processNotifyThrottle.skip(pool, readyQueues, readyCooldowns); skip {
			notify = false
			defer processNotifyThrottle.done(joined)
		}
	}
	// A NULL array means the default for every job, and spares sending it.
	args := []any{kinds, payloads, nil, nil, nil, nil, nil, nil, nil, nil, notify, nil, nil}
	if anyQueue {
		args[2] = queues
	}
	if anyTime {
		args[3], args[4] = runAts, delays
	}
	if anyPriority {
		args[5] = priorities
	}
	if anyMaxAttempts {
		args[6] = maxAttempts
	}
	if anyKey {
		args[7] = uniqueKeys // NULL unique_keys also selects the SQL's faster path
	}
	if anyConcurrencyKey {
		args[8] = concurrencyKeys
	}
	if anyMeta {
		args[9] = metas
	}
	if anyOnDuplicate {
		args[11] = onDuplicates
	}
	if anyUniqueFor {
		args[12] = uniqueFors
	}

	rows, err := db.Query(ctx, enqueueManySQL, args...)
	if err != nil {
		return nil, fmt.Errorf("failed to enqueue jobs: %w", sqlInvalid(err))
	}
	ids := make([]int64, 0, n)
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to enqueue jobs: %w", sqlInvalid(err))
	}
	if len(ids) != n {
		return nil, fmt.Errorf("failed to enqueue jobs: jobs_enqueue_many returned %d ids for %d jobs", len(ids), n)
	}
	return ids, nil
}

type enqueueArgValues struct {
	kind        string
	payload     json.RawMessage
	queue       string
	runAt       *time.Time
	delay       time.Duration
	priority    int32
	maxAttempts int32
	uniqueKey   *string
	// concurrencyKey is nil for no key.
	concurrencyKey *string
	// meta is Meta as JSON, nil for none.
	meta json.RawMessage
	// notifyCooldown is NotifyCooldown with its default applied (-1: no throttle).
	notifyCooldown time.Duration
	// dependsOn is nil for no parents.
	dependsOn       []int64
	onParentFailure string
	notifyFinished  bool
	onDuplicate     string
	// uniqueFor is nil for none.
	uniqueFor *time.Duration
}

// readyNow reports whether the job is due at once by this process's clock, so that its
// enqueue would NOTIFY. A job due later notifies no one (the SQL decides by the database's
// clock), so it passes notify => true and takes no part in the throttle.
func (a *enqueueArgValues) readyNow() bool {
	if a.runAt != nil {
		return !a.runAt.After(time.Now())
	}
	return a.delay == 0
}

// enqueueArgs checks what the SQL cannot see (Go types and the options' combinations) and
// leaves the rest (lengths, empty strings) to the SQL function, which names the parameter.
func enqueueArgs(kind string, payload any, opts *EnqueueOpts, prefix string) (enqueueArgValues, error) {
	if opts == nil {
		opts = &EnqueueOpts{}
	}
	invalid := func(field, format string, args ...any) error {
		return &InvalidError{Field: prefix + field, Problem: fmt.Sprintf(format, args...)}
	}
	a := enqueueArgValues{kind: kind, queue: opts.Queue, delay: opts.Delay, uniqueKey: nil}
	if kind == "" {
		return a, invalid("Kind", "must not be empty")
	}
	// Text the server would refuse (SQLSTATE 22021) is named here, as the SQL names its
	// parameters; json.Marshal already makes Payload and Meta valid UTF-8.
	for _, f := range []struct{ field, value string }{
		{"Kind", kind}, {"EnqueueOpts.Queue", opts.Queue},
		{"EnqueueOpts.UniqueKey", opts.UniqueKey}, {"EnqueueOpts.ConcurrencyKey", opts.ConcurrencyKey},
	} {
		if problem := storableTextError(f.value); problem != "" {
			return a, invalid(f.field, "%s", problem)
		}
	}
	if payload == nil {
		a.payload = json.RawMessage("{}")
	} else {
		b, err := json.Marshal(payload)
		if err != nil {
			return a, invalid("Payload", "cannot be encoded as JSON: %v", err)
		}
		a.payload = b
	}
	if a.queue == "" {
		a.queue = QueueDefault
	}
	if !opts.RunAt.IsZero() {
		if opts.Delay != 0 {
			return a, invalid("EnqueueOpts.Delay", "cannot be combined with RunAt")
		}
		t := opts.RunAt
		a.runAt = &t
	}
	if opts.Delay < 0 {
		return a, invalid("EnqueueOpts.Delay", "must not be negative, got %s", opts.Delay)
	}
	if opts.Priority < math.MinInt32 || opts.Priority > math.MaxInt32 {
		return a, invalid("EnqueueOpts.Priority", "must fit in 32 bits, got %d", opts.Priority)
	}
	a.priority = int32(opts.Priority)
	switch {
	case opts.MaxAttempts == 0:
		a.maxAttempts = MaxAttemptsDefault
	case opts.MaxAttempts < 1 || opts.MaxAttempts > math.MaxInt32:
		return a, invalid("EnqueueOpts.MaxAttempts", "must be at least 1 (0 means %d), got %d", MaxAttemptsDefault, opts.MaxAttempts)
	default:
		a.maxAttempts = int32(opts.MaxAttempts)
	}
	if opts.UniqueKey != "" {
		k := opts.UniqueKey
		a.uniqueKey = &k
	}
	if opts.ConcurrencyKey != "" {
		k := opts.ConcurrencyKey
		a.concurrencyKey = &k
	}
	switch {
	case opts.NotifyCooldown == 0:
		a.notifyCooldown = NotifyCooldownDefault
	case opts.NotifyCooldown < -1:
		return a, invalid("EnqueueOpts.NotifyCooldown", "must not be negative except -1 (no throttle), got %s", opts.NotifyCooldown)
	default:
		a.notifyCooldown = opts.NotifyCooldown
	}
	if opts.Meta != nil {
		b, err := json.Marshal(opts.Meta)
		if err != nil {
			return a, invalid("EnqueueOpts.Meta", "cannot be encoded as JSON: %v", err)
		}
		a.meta = b
	}
	a.dependsOn = opts.DependsOn
	a.onParentFailure = opts.OnParentFailure
	if a.onParentFailure == "" {
		a.onParentFailure = ParentFailureCancel
	}
	a.notifyFinished = opts.NotifyFinished
	a.onDuplicate = opts.OnDuplicate
	if a.onDuplicate == "" {
		a.onDuplicate = DuplicateKeep
	}
	if opts.UniqueFor < 0 {
		return a, invalid("EnqueueOpts.UniqueFor", "must not be negative, got %s", opts.UniqueFor)
	}
	if opts.UniqueFor > 0 {
		d := opts.UniqueFor
		a.uniqueFor = &d
	}
	if prefix != "" && (opts.DependsOn != nil || opts.OnParentFailure != "" || opts.NotifyFinished) {
		return a, invalid("EnqueueOpts.DependsOn", "is not supported by EnqueueMany (nor OnParentFailure, NotifyFinished): use Enqueue or EnqueueWorkflow")
	}
	return a, nil
}
