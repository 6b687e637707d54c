package driver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults and limits of the configuration. A zero field in [Config] or [QueueConfig] means
// its default; -1 disables the durations that say so.
const (
	// QueueDefault is the queue a job goes to when its EnqueueOpts name none.
	QueueDefault = "default"

	// SlotsDefault is how many jobs of one queue a client runs at once.
	SlotsDefault = 10

	// BatchSizeDefault is the most jobs one claim takes (never more than the free slots).
	BatchSizeDefault = 1000

	// BatchSizeMax is the most jobs jobs_claim hands out in one call.
	BatchSizeMax = 10000

	// LeaseDefault is how long a claimed job stays the client's without a heartbeat. It is
	// also the SQL functions' default.
	LeaseDefault = 5 * time.Minute

	// LeaseMin is the shortest Lease accepted.
	LeaseMin = time.Second

	// JobTimeoutDefault bounds a handler's run; it is below LeaseDefault.
	JobTimeoutDefault = time.Minute

	// PollIntervalDefault is how often an idle queue is polled when no notification came.
	PollIntervalDefault = time.Second

	// FetchCooldownDefault is the least time between two claims of one queue.
	FetchCooldownDefault = 2 * time.Millisecond

	// RequeueIntervalDefault is how often a client calls jobs_maintain (jittered), which
	// requeues expired leases and prunes finished jobs by retention.
	RequeueIntervalDefault = 5 * time.Second

	// ShutdownTimeoutDefault is how long shutdown waits for running handlers before
	// cancelling their contexts.
	ShutdownTimeoutDefault = 10 * time.Second

	// CompleteBatchDelayDefault is the longest a completion waits to be flushed.
	CompleteBatchDelayDefault = 2 * time.Millisecond

	// CompleteBatchSizeDefault is the number of pending completions that flushes at once.
	CompleteBatchSizeDefault = 100

	// MaxAttemptsDefault is a job's attempt budget when its EnqueueOpts give none. It is
	// also the SQL functions' default.
	MaxAttemptsDefault = 5
)

// shutdownAbandonAfter is how long shutdown still waits for handlers after cancelling their
// contexts. Handlers that ignore the cancellation longer are abandoned: their jobs stay
// leased and come back through lease expiry.
const shutdownAbandonAfter = 5 * time.Second

// Config configures a [Client]. Only Queues and Handlers are required; every other zero
// field means its documented default.
type Config struct {
	// Queues are the queues this client works, by name, each with its own slots. At least
	// one is required. A name is 1 to 200 bytes of valid UTF-8 without NUL.
	Queues map[string]QueueConfig

	// Handlers run the jobs, by kind; see [AddHandler]. Required, with at least one handler.
	// The client copies the set: handlers added after NewClient are not used.
	Handlers *Handlers

	// ID names this client as the lease holder of its jobs (jobs.lease_holder) and in logs.
	// At most 200 bytes of valid UTF-8 without NUL. Defaults to "<hostname>-<pid>-<random hex>".
	ID string

	// Lease is how long a claimed job stays this client's. The heartbeat extends it while
	// the handler runs; a client that dies loses its jobs to jobs_requeue_expired once it
	// passes. At least LeaseMin. Defaults to LeaseDefault.
	Lease time.Duration

	// HeartbeatInterval is how often the client extends the leases of its running jobs,
	// all of them in one jobs_heartbeat_many call. It must be below Lease. -1 disables
	// heartbeats: a job running longer than Lease then loses its lease. Defaults to Lease/3.
	HeartbeatInterval time.Duration

	// JobTimeout bounds each handler's run through its context, unless the kind's
	// HandlerOpts.Timeout says otherwise. -1 means no timeout. Defaults to JobTimeoutDefault.
	JobTimeout time.Duration

	// PollInterval is how often each queue is claimed from when no notification arrived: the
	// safety net for notifications lost while the listener reconnects, and the wake-up for
	// jobs scheduled in the future. Jittered by up to 10%. At least 1ms. Defaults to
	// PollIntervalDefault.
	PollInterval time.Duration

	// FetchCooldown is the least time between two claims of one queue, so that a storm of
	// notifications or freed slots makes few large claims rather than many small ones. -1
	// means no cooldown. Defaults to FetchCooldownDefault.
	FetchCooldown time.Duration

	// RequeueInterval is how often this client calls jobs_maintain, which takes back jobs
	// whose lease expired (their worker died) and deletes finished jobs past the retention
	// of jobs_settings; a round that hit its batch size is followed by another at once.
	// Jittered by up to 25%; every client does it, without a leader (one round runs at a
	// time; the others' calls return at once), and the call is cheap when nothing is due.
	// At least 10ms; -1 disables it (then schedule jobs_maintain another way). Defaults to
	// RequeueIntervalDefault.
	RequeueInterval time.Duration

	// ShutdownTimeout is how long shutdown waits for running handlers to return before
	// cancelling their contexts (cause ErrShutdown). -1 waits without limit. Defaults to
	// ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration

	// CompleteBatchDelay is the longest a finished job waits before its completion is sent
	// in a jobs_complete_many batch. The last running job of a queue with a concurrency or
	// rate limit does not wait when no other job of the client is running or being claimed
	// (its slot is free on the server only once its completion commits). -1 sends each batch
	// as soon as the previous one returned. Defaults to CompleteBatchDelayDefault.
	CompleteBatchDelay time.Duration

	// CompleteBatchSize is the number of pending completions that sends a batch without
	// waiting for CompleteBatchDelay. At most BatchSizeMax. Defaults to
	// CompleteBatchSizeDefault.
	CompleteBatchSize int

	// ListenerURL is the connection string of the LISTEN connection, which wakes the fetch
	// loops when jobs are enqueued. LISTEN needs a server session of its own: when the pool
	// goes through a pooler in transaction mode (PgBouncer's pool_mode = transaction), give
	// the server's direct address here. Empty means a connection made from the pool's
	// configuration, unless that connection turns out to go through a pooler: then the
	// client does not listen and polls every PollInterval (see "PgBouncer" in the package
	// documentation). Must be empty when DisableListen is set. Defaults to "".
	ListenerURL string

	// DisableListen turns the LISTEN connection off: the fetch loops then learn of new jobs
	// only by polling, every PollInterval, so a job waits half a PollInterval on average
	// before it starts. Defaults to false.
	DisableListen bool

	// Logger receives the client's logs (connection trouble, failed jobs, shutdown). Jobs
	// that succeed are not logged. Defaults to slog.Default().
	Logger *slog.Logger

	// Hook, if set, receives an Event for every job started, completed, failed, snoozed,
	// cancelled or lost; see Hook. A Hook that also implements ClaimHook receives a
	// ClaimEvent for every claim too. Defaults to none.
	Hook Hook

	// Schedules are durable cron schedules this client declares (creates or updates, with
	// jobs_schedule) when it starts; see [Schedule]. Declaring the same schedules at every
	// start neither re-fires nor skips a run. Schedules missing here are not removed
	// (jobs_unschedule does that). Declaring needs the jobs_admin role. A declaration the
	// database refuses (bad cron or time zone, missing role) is logged once at error level
	// and not retried; the client ticks all the same. Defaults to none.
	Schedules []Schedule

	// ScheduleTickInterval is how often this client calls jobs_schedule_tick, which enqueues
	// the jobs of the schedules that are due (whoever declared them). Jittered by up to
	// 10%; every client does it, and the call is one index probe when nothing is due. At
	// least 10ms; -1 disables it. Defaults to PollInterval, or 10ms when PollInterval is
	// shorter.
	ScheduleTickInterval time.Duration
}

// QueueConfig configures one queue of a [Client].
type QueueConfig struct {
	// Slots is how many of the queue's jobs the client runs at once, each on its own worker
	// goroutine; workers are started on demand and exit when idle, so unused slots cost
	// nothing. Defaults to SlotsDefault.
	Slots int

	// BatchSize is the most jobs one claim takes; a claim never takes more than the free
	// slots (plus what is claimed ahead). At most BatchSizeMax. Defaults to Slots plus the
	// most claimed ahead, or BatchSizeDefault, whichever is smaller.
	BatchSize int

	// ClaimAhead is how many jobs beyond the free slots a claim may take into a local
	// buffer, so that a slot that frees starts its next job at once, without a round
	// trip. By default how many adapts to the queue: what its slots finish in
	// ClaimAheadHorizon at the rate they finished jobs lately (none while the queue is idle,
	// a job or two when its jobs are slow, up to four times Slots in a drain of short jobs). None at
	// all while the queue has a concurrency or rate limit (jobs_queue_limited, asked at
	// start and once per PollInterval), where a buffered job would hold one of its slots or
	// spend one of its starts without running. Jobs are claimed ahead only while a slot is
	// free.
	//
	// Buffered jobs are claimed (running, at their new attempt) and leased: the heartbeat
	// extends their leases like those of running jobs. A job buffered for longer than
	// ClaimAheadTTL, and every buffered job at shutdown, is given back with jobs_snooze's
	// rule: queued again at once, its attempt not spent (max_attempts + 1), and the next
	// claim gives it a new attempt number.
	//
	// Defaults to 0: adaptive, at most 4 × Slots. A positive value claims that many ahead
	// whenever a slot is free, however fast the queue's jobs finish (except on a limited
	// queue). ClaimAheadOff (-1) claims only free slots. At most BatchSizeMax.
	ClaimAhead int

	claimAheadAdaptive bool // ClaimAhead was 0: set by validate
}

// ClaimAheadOff as QueueConfig.ClaimAhead makes claims take only free slots.
const ClaimAheadOff = -1

// ClaimAheadHorizon is how far ahead a queue claims (QueueConfig.ClaimAhead): the jobs its
// slots finish in this long at their recent rate, so the buffer covers a claim's round trip
// and the fetch cooldown in a drain, and holds a few jobs of a queue of slow jobs.
const ClaimAheadHorizon = 20 * time.Millisecond

// ClaimAheadTTL is the longest a job claimed ahead (QueueConfig.ClaimAhead) waits in the
// buffer before it is given back; it is checked when the fetch loop wakes (at least every
// PollInterval).
const ClaimAheadTTL = 2 * time.Second

// validate checks the fields as given (zero meaning default) and returns the configuration
// with its defaults filled in.
func (c *Config) validate() (*Config, error) {
	if c == nil {
		return nil, &InvalidError{Field: "Config", Problem: "must not be nil"}
	}
	cfg := *c
	invalid := func(field, format string, args ...any) error {
		return &InvalidError{Field: "Config." + field, Problem: fmt.Sprintf(format, args...)}
	}

	if len(cfg.Queues) == 0 {
		return nil, invalid("Queues", "must name at least one queue")
	}
	names := make([]string, 0, len(cfg.Queues))
	for name := range cfg.Queues {
		names = append(names, name)
	}
	sort.Strings(names) // report the same field every time
	queues := make(map[string]QueueConfig, len(cfg.Queues))
	for _, name := range names {
		q := cfg.Queues[name]
		field := "Queues[" + strconv.Quote(name) + "]"
		switch {
		case name == "" || len(name) > 200:
			return nil, invalid(field, "queue name must be 1 to 200 bytes, got %d", len(name))
		case storableTextError(name) != "":
			return nil, invalid(field, "queue name %s", storableTextError(name))
		case q.Slots < 0:
			return nil, invalid(field+".Slots", "must not be negative, got %d", q.Slots)
		case q.BatchSize < 0 || q.BatchSize > BatchSizeMax:
			return nil, invalid(field+".BatchSize", "must be between 0 and %d, got %d", BatchSizeMax, q.BatchSize)
		case q.ClaimAhead < ClaimAheadOff || q.ClaimAhead > BatchSizeMax:
			return nil, invalid(field+".ClaimAhead", "must be ClaimAheadOff (-1) or between 0 and %d, got %d", BatchSizeMax, q.ClaimAhead)
		}
		if q.Slots == 0 {
			q.Slots = SlotsDefault
		}
		switch q.ClaimAhead {
		case 0:
			q.ClaimAhead, q.claimAheadAdaptive = min(4*q.Slots, BatchSizeMax), true
		case ClaimAheadOff:
			q.ClaimAhead = 0
		}
		if q.BatchSize == 0 {
			q.BatchSize = min(q.Slots+q.ClaimAhead, BatchSizeDefault)
		}
		queues[name] = q
	}
	cfg.Queues = queues

	if cfg.Handlers == nil || len(cfg.Handlers.byKind) == 0 && cfg.Handlers.anyKind == nil {
		return nil, invalid("Handlers", "must have at least one handler (see AddHandler)")
	}
	if len(cfg.ID) > 200 {
		return nil, invalid("ID", "must be at most 200 bytes, got %d", len(cfg.ID))
	}
	if problem := storableTextError(cfg.ID); problem != "" {
		return nil, invalid("ID", "%s", problem)
	}
	if cfg.ID == "" {
		cfg.ID = defaultID()
	}

	if cfg.Lease == 0 {
		cfg.Lease = LeaseDefault
	}
	if cfg.Lease < LeaseMin {
		return nil, invalid("Lease", "must be at least %s, got %s", LeaseMin, cfg.Lease)
	}
	if err := checkBatchWaits(cfg.Handlers, cfg.Lease); err != nil {
		return nil, err
	}
	switch {
	case cfg.HeartbeatInterval == 0:
		cfg.HeartbeatInterval = cfg.Lease / 3
	case cfg.HeartbeatInterval == -1:
	case cfg.HeartbeatInterval <= 0 || cfg.HeartbeatInterval >= cfg.Lease:
		return nil, invalid("HeartbeatInterval", "must be -1 (disabled) or between 0 and Lease (%s), got %s",
			cfg.Lease, cfg.HeartbeatInterval)
	}
	if err := durationField(&cfg.JobTimeout, JobTimeoutDefault, true, 0); err != nil {
		return nil, invalid("JobTimeout", "%s", err)
	}
	if err := durationField(&cfg.PollInterval, PollIntervalDefault, false, time.Millisecond); err != nil {
		return nil, invalid("PollInterval", "%s", err)
	}
	if err := durationField(&cfg.FetchCooldown, FetchCooldownDefault, true, 0); err != nil {
		return nil, invalid("FetchCooldown", "%s", err)
	}
	if err := durationField(&cfg.RequeueInterval, RequeueIntervalDefault, true, 10*time.Millisecond); err != nil {
		return nil, invalid("RequeueInterval", "%s", err)
	}
	if err := durationField(&cfg.ScheduleTickInterval, max(cfg.PollInterval, 10*time.Millisecond), true, 10*time.Millisecond); err != nil {
		return nil, invalid("ScheduleTickInterval", "%s", err)
	}
	if _, err := validateSchedules(cfg.Schedules); err != nil {
		return nil, err
	}
	if err := durationField(&cfg.ShutdownTimeout, ShutdownTimeoutDefault, true, 0); err != nil {
		return nil, invalid("ShutdownTimeout", "%s", err)
	}
	if err := durationField(&cfg.CompleteBatchDelay, CompleteBatchDelayDefault, true, 0); err != nil {
		return nil, invalid("CompleteBatchDelay", "%s", err)
	}
	switch {
	case cfg.CompleteBatchSize == 0:
		cfg.CompleteBatchSize = CompleteBatchSizeDefault
	case cfg.CompleteBatchSize < 0 || cfg.CompleteBatchSize > BatchSizeMax:
		return nil, invalid("CompleteBatchSize", "must be between 0 and %d, got %d", BatchSizeMax, cfg.CompleteBatchSize)
	}
	if cfg.ListenerURL != "" {
		if cfg.DisableListen {
			return nil, invalid("ListenerURL", "must be empty when DisableListen is set")
		}
		if _, err := pgx.ParseConfig(cfg.ListenerURL); err != nil {
			return nil, invalid("ListenerURL", "%s", err)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &cfg, nil
}

// durationField fills in the default for zero and checks the value: -1 is accepted when
// disable is true, and anything else must be at least least (and positive).
func durationField(d *time.Duration, def time.Duration, disable bool, least time.Duration) error {
	switch {
	case *d == 0:
		*d = def
		return nil
	case *d == -1 && disable:
		return nil
	case *d < 0 && disable:
		return fmt.Errorf("must be -1 (disabled) or positive, got %s", *d)
	case *d < 0:
		return fmt.Errorf("must be positive, got %s", *d)
	case *d < least:
		return fmt.Errorf("must be at least %s, got %s", least, *d)
	}
	return nil
}

func defaultID() string {
	host, err := os.Hostname()
	// The ID is a text parameter of jobs_claim: a hostname is only bytes to the kernel.
	host = cutText(storableText(host), 150)
	if err != nil || host == "" {
		host = "unknown"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}
