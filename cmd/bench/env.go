package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/internal/pglocal"
)

// benchDatabase is the database the benchmark creates on a throwaway server.
const benchDatabase = "skiplock_bench"

// env is the server the benchmark runs against and what it found out about it.
type env struct {
	cfg     *config
	server  *pglocal.Server // nil when the user gave a URL
	url     string          // the benchmark's database
	version string          // skiplock's version, for the JSON lines

	schemaVersion int32
	pgSettings    [][2]string // name, value: the server settings printed with the results
	pgssReady     bool        // pg_stat_statements is usable
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// openEnv connects to cfg.databaseURL, or starts a throwaway server when it is empty.
func openEnv(ctx context.Context, cfg *config) (*env, error) {
	e := &env{cfg: cfg, version: skiplockVersion()}
	if cfg.databaseURL != "" {
		e.url = cfg.databaseURL
	} else {
		settings := map[string]string{}
		if cfg.pgss {
			settings["shared_preload_libraries"] = "pg_stat_statements"
			settings["pg_stat_statements.track"] = "all" // statements inside the jobs_* functions too
		}
		logf("starting a throwaway PostgreSQL server (internal/pglocal, fsync on)")
		srv, err := pglocal.Start(ctx, &pglocal.Options{Settings: settings, Logf: logf})
		if err != nil {
			return nil, fmt.Errorf("failed to start a local PostgreSQL server: %w", err)
		}
		e.server = srv
		conn, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			_ = srv.Close()
			return nil, fmt.Errorf("failed to connect to the local server: %w", err)
		}
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{benchDatabase}.Sanitize())
		conn.Close(ctx)
		if err != nil {
			_ = srv.Close()
			return nil, fmt.Errorf("failed to create database %s: %w", benchDatabase, err)
		}
		e.url = srv.URLFor(benchDatabase)
	}

	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("failed to connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := e.readSettings(ctx, conn); err != nil {
		e.close()
		return nil, err
	}
	if cfg.pgss && e.server != nil {
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			e.close()
			return nil, fmt.Errorf("failed to create pg_stat_statements: %w", err)
		}
		e.pgssReady = true
	}
	return e, nil
}

func (e *env) close() {
	if e.server != nil {
		if err := e.server.Close(); err != nil {
			logf("failed to stop the local server: %v", err)
		}
		e.server = nil
	}
}

func (e *env) readSettings(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `
		SELECT name, setting || coalesce(unit, '')
		FROM pg_settings
		WHERE name = ANY($1)
		ORDER BY array_position($1, name)`,
		[]string{"server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
			"shared_buffers", "max_connections", "autovacuum", "jit"})
	if err != nil {
		return fmt.Errorf("failed to read server settings: %w", err)
	}
	kv, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var k, v string
		err := r.Scan(&k, &v)
		return [2]string{k, v}, err
	})
	if err != nil {
		return fmt.Errorf("failed to read server settings: %w", err)
	}
	for i, s := range kv {
		if s[0] == "shared_buffers" { // reported in 8kB pages
			var pretty string
			if err := conn.QueryRow(ctx, "SELECT current_setting('shared_buffers')").Scan(&pretty); err == nil {
				kv[i][1] = pretty
			}
		}
	}
	e.pgSettings = kv
	return nil
}

// settingsLine is the one-line summary printed above the table.
func (e *env) settingsLine() string {
	var b strings.Builder
	where := "throwaway local server (internal/pglocal)"
	if e.server == nil {
		where = "server of -database-url"
	}
	fmt.Fprintf(&b, "PostgreSQL: %s\n  ", where)
	for i, s := range e.pgSettings {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", s[0], s[1])
	}
	fmt.Fprintf(&b, "\nGo: %s GOMAXPROCS=%d NumCPU=%d; skiplock %s", runtime.Version(), gomaxprocs(), runtime.NumCPU(), e.version)
	if e.schemaVersion > 0 {
		fmt.Fprintf(&b, " (schema version %d)", e.schemaVersion)
	}
	b.WriteString("\n")
	c := e.cfg
	if c.patchSQL != "" {
		fmt.Fprintf(&b, "PATCHED: -patch-sql %s was applied after each install; these are not the numbers of the migrations alone.\n", c.patchSQL)
	}
	if c.doneRetention != "" {
		fmt.Fprintf(&b, "done_retention=%s after each install (-done-retention).\n", c.doneRetention)
	}
	fmt.Fprintf(&b, "Bench: jobs=%d workers=%d (slots per process) claim-ahead=%d pool=%d batch=%d producers=%d steady=%s naive-workers=%d bloat-rows=%d",
		c.jobs, c.workers, c.claimAhead, c.pool, c.batch, c.producers, c.steadyDuration, c.naiveWorkers, c.bloatRows)
	return b.String()
}

// commonFields go on every JSON line.
func (e *env) commonFields() []benchresult.Field {
	s := map[string]string{}
	for _, kv := range e.pgSettings {
		s[kv[0]] = kv[1]
	}
	s["gomaxprocs"] = fmt.Sprint(gomaxprocs())
	s["go"] = runtime.Version()
	if e.server != nil {
		s["server"] = "pglocal"
	} else {
		s["server"] = "database-url"
	}
	if e.cfg.patchSQL != "" {
		s["patch_sql"] = e.cfg.patchSQL
	}
	if e.cfg.doneRetention != "" {
		s["done_retention"] = e.cfg.doneRetention
	}
	if e.cfg.claimAhead != 0 {
		s["claim_ahead"] = fmt.Sprint(e.cfg.claimAhead)
	}
	return []benchresult.Field{
		{Key: "workers", Value: e.cfg.workers},
		{Key: "pool_max_conns", Value: e.cfg.pool},
		{Key: "schema_version", Value: e.schemaVersion},
		{Key: "settings", Value: s},
	}
}

// resetSchema drops the benchmark's schema and installs skiplock into it afresh.
func (e *env) resetSchema(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		return fmt.Errorf("failed to connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{e.cfg.schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("failed to drop schema %s: %w", e.cfg.schema, err)
	}
	if err := skiplock.Migrate(ctx, conn, &skiplock.MigrateOpts{Schema: e.cfg.schema}); err != nil {
		return err
	}
	if e.cfg.patch != "" {
		// Simple protocol: the file may hold several statements.
		if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{e.cfg.schema}.Sanitize()+";\n"+e.cfg.patch,
			pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("-patch-sql %s: %w", e.cfg.patchSQL, err)
		}
	}
	if e.cfg.doneRetention != "" {
		settings := pgx.Identifier{e.cfg.schema, "jobs_settings"}.Sanitize()
		if _, err := conn.Exec(ctx, "UPDATE "+settings+" SET done_retention = $1::interval", e.cfg.doneRetention); err != nil {
			return fmt.Errorf("-done-retention %s: %w", e.cfg.doneRetention, err)
		}
	}
	table := pgx.Identifier{e.cfg.schema, skiplock.VersionTable}.Sanitize()
	if err := conn.QueryRow(ctx, "SELECT version FROM "+table).Scan(&e.schemaVersion); err != nil {
		return fmt.Errorf("failed to read the installed schema version: %w", err)
	}
	if e.pgssReady {
		if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			logf("pg_stat_statements_reset: %v", err)
		}
	}
	return nil
}

// dropSchema removes the benchmark's schema at the end of the run.
func (e *env) dropSchema(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{e.cfg.schema}.Sanitize()+" CASCADE")
	return err
}

// newPool opens a pool whose sessions find the benchmark's schema first. Each scenario
// gets its own pool, so no session carries plans or caches from an earlier scenario.
func (e *env) newPool(ctx context.Context, maxConns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the database URL: %w", err)
	}
	pc.MaxConns = int32(maxConns)
	pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{e.cfg.schema}.Sanitize()
	pc.ConnConfig.RuntimeParams["application_name"] = "skiplock-bench"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("failed to open a pool: %w", err)
	}
	return pool, nil
}

// settle runs ANALYZE on the jobs table and a CHECKPOINT, so that a scenario starts with
// fresh statistics and does not pay for the load's checkpoint. Both are untimed.
// CHECKPOINT needs superuser or pg_checkpoint; without them it is skipped.
func settle(ctx context.Context, pool *pgxpool.Pool, table string) error {
	if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
		return fmt.Errorf("failed to analyze %s: %w", table, err)
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return nil
		}
		return fmt.Errorf("failed to checkpoint: %w", err)
	}
	return nil
}

// skiplockVersion is the module version this binary was built from ("devel" from a
// checkout).
func skiplockVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "devel"
	}
	return bi.Main.Version
}

// pgssReport prints the statements that took the most server time during a scenario.
func (e *env) pgssReport(ctx context.Context, scenario string) {
	if !e.pgssReady {
		return
	}
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		logf("pg_stat_statements: %v", err)
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3), rows,
		       shared_blks_hit, shared_blks_read, shared_blks_dirtied, wal_bytes,
		       left(regexp_replace(query, '\s+', ' ', 'g'), 110)
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC
		LIMIT 8`)
	if err != nil {
		logf("pg_stat_statements: %v", err)
		return
	}
	defer rows.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "pg_stat_statements, %s (top by total time; nested statements included):\n", scenario)
	fmt.Fprintf(&b, "  %8s %10s %9s %8s %10s %8s %8s %10s  %s\n", "calls", "total_ms", "mean_ms", "rows", "blks_hit", "read", "dirtied", "wal_bytes", "query")
	for rows.Next() {
		var calls, nrows, hit, read, dirtied int64
		var total, mean float64
		var wal float64
		var q string
		if err := rows.Scan(&calls, &total, &mean, &nrows, &hit, &read, &dirtied, &wal, &q); err != nil {
			logf("pg_stat_statements: %v", err)
			return
		}
		fmt.Fprintf(&b, "  %8d %10.1f %9.3f %8d %10d %8d %8d %10.0f  %s\n", calls, total, mean, nrows, hit, read, dirtied, wal, q)
	}
	if err := rows.Err(); err != nil {
		logf("pg_stat_statements: %v", err)
		return
	}
	fmt.Fprint(os.Stderr, b.String())
}

// freshDatabase drops and creates dbname on the throwaway server, for a peer harness to
// use alone, and returns its URL.
func (e *env) freshDatabase(ctx context.Context, dbname string) (string, error) {
	if e.server == nil {
		return "", errors.New("peer harnesses run only on the throwaway server")
	}
	conn, err := pgx.Connect(ctx, e.server.URL())
	if err != nil {
		return "", fmt.Errorf("failed to connect to the local server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, stmt := range []string{"DROP DATABASE IF EXISTS ", "CREATE DATABASE "} {
		if _, err := conn.Exec(ctx, stmt+pgx.Identifier{dbname}.Sanitize()); err != nil {
			return "", fmt.Errorf("failed to create database %s: %w", dbname, err)
		}
	}
	return e.server.URLFor(dbname), nil
}
