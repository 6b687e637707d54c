package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/internal/pglocal"
)

// What a drain cost the database server, measured the same way for skiplock and for every
// peer: the CPU time of the server's processes (the postmaster and all its children,
// backends, WAL writer, checkpointer and autovacuum included, from /proc) and the WAL it
// wrote (pg_current_wal_insert_lsn), from the moment the workers start to the moment they
// have stopped, plus the work the system defers: pruning the finished jobs it keeps (at
// its default retention, in the batches its own cleaner uses) and the VACUUM of its jobs
// table that cleans up after the drain's updates and deletes. Per job, that is what a
// user's server pays for each job run, whichever system runs it.

// dbCost is the cost of one stretch of work on the server.
type dbCost struct {
	cpu      time.Duration
	cpuKnown bool // false against a DATABASE_URL: the server's processes are not ours to read
	wal      int64
}

func (c dbCost) plus(d dbCost) dbCost {
	return dbCost{cpu: c.cpu + d.cpu, cpuKnown: c.cpuKnown && d.cpuKnown, wal: c.wal + d.wal}
}

// costMark is the server's CPU time and WAL position at one moment.
type costMark struct {
	cpu      time.Duration
	cpuKnown bool
	lsn      string
}

// costMeter takes costMarks over a connection of its own (opened once, so that no backend
// is started between two marks).
type costMeter struct {
	server *pglocal.Server // nil: CPU unknown
	conn   *pgx.Conn
}

func (e *env) newCostMeter(ctx context.Context) (*costMeter, error) {
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		return nil, fmt.Errorf("cost meter: failed to connect: %w", err)
	}
	return &costMeter{server: e.server, conn: conn}, nil
}

func (m *costMeter) close() { _ = m.conn.Close(context.Background()) }

// mark reads the WAL position, then the CPU times.
func (m *costMeter) mark(ctx context.Context) (costMark, error) {
	var cm costMark
	if err := m.conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&cm.lsn); err != nil {
		return cm, fmt.Errorf("cost meter: failed to read the WAL position: %w", err)
	}
	if m.server != nil {
		cpu, err := clustersCPU([]*pglocal.Server{m.server})
		if err != nil {
			return cm, fmt.Errorf("cost meter: %w", err)
		}
		cm.cpu, cm.cpuKnown = cpu, true
	}
	return cm, nil
}

// since is the cost from from to now.
func (m *costMeter) since(ctx context.Context, from costMark) (dbCost, error) {
	var wal int64
	if err := m.conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint", from.lsn).Scan(&wal); err != nil {
		return dbCost{}, fmt.Errorf("cost meter: failed to read the WAL position: %w", err)
	}
	c := dbCost{wal: wal}
	if from.cpuKnown {
		cpu, err := clustersCPU([]*pglocal.Server{m.server})
		if err != nil {
			return dbCost{}, fmt.Errorf("cost meter: %w", err)
		}
		c.cpu, c.cpuKnown = cpu-from.cpu, true
	}
	return c, nil
}

// deferredStep is one statement of a system's deferred work. With batch > 0 it removes up
// to batch finished jobs a run (a DELETE, or a SELECT returning how many it deleted) and
// is run again while it removes that many, as the system's own cleaner does.
type deferredStep struct {
	sql   string
	batch int64
}

// deferredWork is each system's work left for later by a drain of its default queue.
var deferredWork = map[string][]deferredStep{
	// Done jobs are kept (done_retention 1 day) and then deleted by the clients'
	// jobs_maintain, up to 10,000 a round along jobs_pkey, as jobs_prune does.
	"skiplock": {{"SELECT jobs_prune(older_than => '0', max_jobs => 10000)", 10000}, {"VACUUM jobs", 0}},
	// River keeps completed jobs 24 hours; its JobCleaner then deletes them 10,000 at a
	// time, lowest id first (riverdriver's JobDeleteBefore, BatchSizeDefault).
	"river": {{`DELETE FROM river_job WHERE id IN (
		SELECT id FROM river_job WHERE state = 'completed' AND finalized_at < now() ORDER BY id LIMIT 10000)`, 10000},
		{"VACUUM river_job", 0}},
	// graphile-worker deletes a job when it completes: nothing to prune.
	"graphile-worker": {{"VACUUM graphile_worker._private_jobs", 0}},
}

// runDeferred runs system's deferred work over conn and returns its cost.
func (m *costMeter) runDeferred(ctx context.Context, conn *pgx.Conn, system string) (dbCost, error) {
	steps, ok := deferredWork[system]
	if !ok {
		return dbCost{}, fmt.Errorf("no deferred work known for %s", system)
	}
	from, err := m.mark(ctx)
	if err != nil {
		return dbCost{}, err
	}
	for _, step := range steps {
		for {
			var removed int64
			if strings.HasPrefix(step.sql, "SELECT") {
				err = conn.QueryRow(ctx, step.sql).Scan(&removed)
			} else {
				var tag pgconn.CommandTag
				tag, err = conn.Exec(ctx, step.sql)
				removed = tag.RowsAffected()
			}
			if err != nil {
				return dbCost{}, fmt.Errorf("%s's deferred work: %w", system, err)
			}
			if step.batch == 0 || removed < step.batch {
				break
			}
		}
	}
	return m.since(ctx, from)
}

// addCost puts a drain's cost per job in res: its JSON fields, a note, and res.cost.
func addCost(res *result, drain, deferred dbCost) {
	total := drain.plus(deferred)
	per := func(v float64) float64 { return benchresult.Round(v/float64(res.Jobs), 1) }
	res.cost = &costPerJob{walBytes: per(float64(total.wal))}
	res.Add("server_wal_bytes_per_job", res.cost.walBytes)
	res.Add("deferred_wal_bytes_per_job", per(float64(deferred.wal)))
	if total.cpuKnown {
		res.cost.cpuMicros = per(float64(total.cpu.Microseconds()))
		res.cost.cpuKnown = true
		res.Add("server_cpu_us_per_job", res.cost.cpuMicros)
		res.Add("deferred_cpu_us_per_job", per(float64(deferred.cpu.Microseconds())))
		res.note("server %.0f µs and %.0f B of WAL per job, deferred prune and vacuum included", res.cost.cpuMicros, res.cost.walBytes)
	} else {
		res.note("%.0f B of WAL per job (whole server), deferred prune and vacuum included", res.cost.walBytes)
	}
}

// costPerJob is a result's database cost per job, drain and deferred work together.
type costPerJob struct {
	cpuMicros float64
	cpuKnown  bool
	walBytes  float64
}
