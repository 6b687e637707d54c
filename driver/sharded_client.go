package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ShardedClient works the same queues on several shards, each an ordinary skiplock
// database made shard N with jobs_set_shard(N). Make one with [NewShardedClient], then call
// [ShardedClient.Run].
//
// It is one [Client] per shard under one Run and Stop: each shard has its own fetch loops
// (with Config's slots per queue, so a shard's backlog never waits for another shard's),
// LISTEN connection, heartbeats, completer and maintainer. A job is claimed from one shard
// and every later call about it (completion, failure, snooze, cancellation, heartbeat) goes
// to that shard, which is the one its id names ([ShardOf]).
type ShardedClient struct {
	cfg     *Config
	logger  *slog.Logger
	shards  []*shardClient       // sorted by number
	byShard map[int]*shardClient // by number

	mu       sync.Mutex
	started  bool
	stopOnce sync.Once
	stopCh   chan struct{} // closed by Stop
	done     chan struct{} // closed when Run returns
}

// shardClient is one shard of a ShardedClient: its number and pool, and the Client that
// works it.
type shardClient struct {
	number int
	pool   *pgxpool.Pool
	client *Client
	logger *slog.Logger
}

// NewShardedClient makes a client that works the queues of cfg on every shard. It validates
// the shards (numbers 0 to ShardCount-1, each once, a pool each) and cfg as [NewClient]
// does, and does no I/O.
//
// cfg applies to each shard: a queue's Slots are per shard, so a queue that has jobs on
// every shard runs up to Slots × shards of them at once (a queue normally lives on one
// shard, chosen by the application that enqueues). Each shard's pool needs the size a
// Client's pool needs. Two fields differ: Config.ListenerURL must be empty (give each
// Shard's ListenerURL instead), and Config.Schedules must be empty, because declaring a
// schedule on every shard would enqueue its jobs once per shard: declare it on the shard
// that holds its queue, with jobs_schedule or a Client of that shard. The client still
// calls jobs_schedule_tick on every shard.
func NewShardedClient(shards []Shard, cfg *Config) (*ShardedClient, error) {
	if len(shards) == 0 {
		return nil, &InvalidError{Field: "shards", Problem: "must name at least one shard"}
	}
	checked, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if checked.ListenerURL != "" {
		return nil, &InvalidError{Field: "Config.ListenerURL", Problem: "must be empty for a sharded client; set each Shard's ListenerURL"}
	}
	if len(checked.Schedules) > 0 {
		return nil, &InvalidError{Field: "Config.Schedules",
			Problem: "must be empty for a sharded client (it would declare each schedule on every shard); declare schedules on the shard that holds their queue"}
	}
	sc := &ShardedClient{
		cfg:     checked,
		logger:  checked.Logger.With(slog.String("skiplock_client", checked.ID)),
		byShard: make(map[int]*shardClient, len(shards)),
		stopCh:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	for i, s := range shards {
		field := "shards[" + strconv.Itoa(i) + "]"
		switch {
		case s.Number < 0 || s.Number >= ShardCount:
			return nil, &InvalidError{Field: field + ".Number", Problem: fmt.Sprintf("must be between 0 and %d, got %d", ShardCount-1, s.Number)}
		case sc.byShard[s.Number] != nil:
			return nil, &InvalidError{Field: field + ".Number", Problem: fmt.Sprintf("shard %d is given twice", s.Number)}
		case s.Pool == nil:
			return nil, &InvalidError{Field: field + ".Pool", Problem: "must not be nil"}
		}
		// Each shard's client logs with the shard's number, so that a shard's trouble
		// (a refused connection, a failed claim) says which shard it is.
		shardCfg := *checked
		shardCfg.ListenerURL = s.ListenerURL
		shardCfg.Logger = checked.Logger.With(slog.Int("skiplock_shard", s.Number))
		client, err := NewClient(s.Pool, &shardCfg)
		if err != nil {
			var ie *InvalidError
			if errors.As(err, &ie) && ie.Field == "Config.ListenerURL" {
				ie.Field = field + ".ListenerURL"
			}
			return nil, err
		}
		shc := &shardClient{number: s.Number, pool: s.Pool, client: client,
			logger: sc.logger.With(slog.Int("skiplock_shard", s.Number))}
		sc.byShard[s.Number] = shc
		sc.shards = append(sc.shards, shc)
	}
	sort.Slice(sc.shards, func(i, j int) bool { return sc.shards[i].number < sc.shards[j].number })
	return sc, nil
}

// ID is the client's lease holder name (Config.ID or its default), the same on every shard.
func (sc *ShardedClient) ID() string { return sc.cfg.ID }

// Shards returns the client's shard numbers, in increasing order.
func (sc *ShardedClient) Shards() []int {
	out := make([]int, len(sc.shards))
	for i, s := range sc.shards {
		out[i] = s.number
	}
	return out
}

// Pool returns the pool of the shard that holds the job with this id (see [ShardOf]), for
// the handler's own transaction when it calls [CompleteTx], or for any other call about the
// job. It returns an *UnknownShardError when that shard is not one of the client's.
func (sc *ShardedClient) Pool(id int64) (*pgxpool.Pool, error) {
	s := sc.byShard[ShardOf(id)]
	if s == nil {
		return nil, &UnknownShardError{ID: id, Shard: ShardOf(id)}
	}
	return s.pool, nil
}

// Run works the queues on every shard until ctx is cancelled or Stop is called, then shuts
// every shard down gracefully as [Client.Run] does (the shards at the same time, so
// Config.ShutdownTimeout bounds them all) and returns nil.
//
// Before working a shard it checks that jobs_shard() there returns the shard's number.
// Until the check has succeeded, and whenever the shard is down afterwards, that shard's
// parts log (with the attribute skiplock_shard naming it), back off and retry, while the
// other shards keep working; its jobs run once it is back. An unreachable shard therefore
// never makes Run return.
//
// Run returns an error only when it was already called (ErrAlreadyRunning), or when it
// gives up because a shard is misconfigured, which retrying cannot fix: its database is
// another shard or none (ErrWrongShard), skiplock is not installed there, or the role may
// not call its functions. Then it shuts every shard down as above and returns an error that
// wraps ErrGaveUp and a *ShardError naming the shard, which wraps the cause. It gives up on
// the whole client rather than leave one shard's jobs unworked without anyone noticing.
func (sc *ShardedClient) Run(ctx context.Context) error {
	sc.mu.Lock()
	if sc.started {
		sc.mu.Unlock()
		return ErrAlreadyRunning
	}
	sc.started = true
	sc.mu.Unlock()
	defer close(sc.done)

	runCtx, stopShards := context.WithCancel(context.WithoutCancel(ctx))
	defer stopShards()
	gaveUp := make(chan error, len(sc.shards))
	var wg sync.WaitGroup
	for _, s := range sc.shards {
		wg.Go(func() {
			if err := s.run(runCtx); err != nil {
				gaveUp <- err
			}
		})
	}
	sc.logger.Info("skiplock sharded client started", slog.Int("shards", len(sc.shards)))

	var runErr error
	select {
	case <-ctx.Done():
	case <-sc.stopCh:
	case err := <-gaveUp:
		runErr = err
		sc.logger.Error("skiplock sharded client cannot work a shard; shutting down", slog.Any("error", err))
	}
	stopShards()
	wg.Wait()
	sc.logger.Info("skiplock sharded client stopped")
	return runErr
}

// run checks the shard's number, then runs its client until ctx is done. It returns nil
// then, or an error wrapping ErrGaveUp and a *ShardError when the shard is misconfigured.
func (s *shardClient) run(ctx context.Context) error {
	if err := s.checkNumber(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrGaveUp, &ShardError{Shard: s.number, Err: err})
	}
	if ctx.Err() != nil {
		return nil
	}
	err := s.client.Run(ctx)
	if err == nil {
		return nil
	}
	// The client's error wraps ErrGaveUp and the cause: name the shard in between.
	cause := err
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := u.Unwrap(); len(errs) == 2 && errs[0] == ErrGaveUp {
			cause = errs[1]
		}
	}
	return fmt.Errorf("%w: %w", ErrGaveUp, &ShardError{Shard: s.number, Err: cause})
}

// checkNumber asks the shard's database for its number until it answers (retrying while
// the shard is unreachable, logging each failure) and returns an error when the number is
// not the configured one or asking cannot work. It returns nil when ctx is done first.
func (s *shardClient) checkNumber(ctx context.Context) error {
	var b backoff
	for {
		qctx, cancel := context.WithTimeout(ctx, opTimeout)
		var number *int32
		err := s.pool.QueryRow(qctx, shardNumberSQL).Scan(&number)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil && number == nil:
			return fmt.Errorf("%w: jobs_shard() is NULL (jobs_set_shard was never called there), want %d", ErrWrongShard, s.number)
		case err == nil && int(*number) != s.number:
			return fmt.Errorf("%w: jobs_shard() is %d, want %d", ErrWrongShard, *number, s.number)
		case err == nil:
			return nil
		case !retryable(err) || fatalSQL(err):
			return fmt.Errorf("failed to ask the shard its number: %w", err)
		}
		s.logger.Warn("failed to reach shard to check its number; retrying", slog.Any("error", err))
		if !sleepCtx(ctx, b.next()) {
			return nil
		}
	}
}

// Stop asks Run to shut down (see Run) and waits until it has returned or ctx is done. It
// is safe to call more than once, concurrently, and before Run (Run then returns at once).
func (sc *ShardedClient) Stop(ctx context.Context) error {
	sc.stopOnce.Do(func() { close(sc.stopCh) })
	sc.mu.Lock()
	started := sc.started
	sc.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-sc.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("failed to wait for sharded client to stop: %w", ctx.Err())
	}
}
