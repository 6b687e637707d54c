// Command skiplock installs and inspects skiplock in a PostgreSQL database.
//
//	skiplock migrate [--database-url URL] [--schema NAME]   apply migrations up to the latest (idempotent)
//	skiplock sql [--schema NAME] [--from N]                  print the install SQL for psql or other tools
//	skiplock stats [--database-url URL] [--schema NAME]      print jobs_stats()
//	skiplock ui [--addr 127.0.0.1:8080] [--read-only]        serve the web dashboard (package ui)
//
// The database URL defaults to $DATABASE_URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skiplock/skiplock"
)

const usage = `usage: skiplock <command> [flags]

commands:
  migrate   apply skiplock's migrations to the latest version (idempotent)
  sql       print the complete install SQL (for psql or another migration tool)
  stats     print job counts per queue and state (jobs_stats)
  ui        serve the web dashboard, /metrics and /healthz

Run 'skiplock <command> -h' for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "skiplock:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("skiplock "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	schema := fs.String("schema", "", "schema to use (default: the connection's current schema, usually public)")
	switch cmd {
	case "migrate", "stats":
		dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL connection URL (default $DATABASE_URL)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%s: unexpected argument %q", cmd, fs.Arg(0))
		}
		if *dbURL == "" {
			return fmt.Errorf("%s: no database: set DATABASE_URL or pass --database-url", cmd)
		}
		connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(connectCtx, *dbURL)
		if err != nil {
			return fmt.Errorf("failed to connect: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if cmd == "migrate" {
			if err := skiplock.Migrate(ctx, conn, &skiplock.MigrateOpts{Schema: *schema}); err != nil {
				return err
			}
			var version int32
			table := pgx.Identifier{skiplock.VersionTable}
			if *schema != "" {
				table = pgx.Identifier{*schema, skiplock.VersionTable}
			}
			if err := conn.QueryRow(ctx, "SELECT version FROM "+table.Sanitize()).Scan(&version); err != nil {
				return fmt.Errorf("failed to read installed version: %w", err)
			}
			fmt.Fprintf(stdout, "skiplock schema is at version %d\n", version)
			return nil
		}
		return printStats(ctx, conn, *schema, stdout)
	case "sql":
		from := fs.Int("from", 0, "installed version to upgrade from (0: fresh install)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("sql: unexpected argument %q", fs.Arg(0))
		}
		if *from < 0 || *from > math.MaxInt32 {
			return fmt.Errorf("sql: --from must be an installed version (0 or more), got %d", *from)
		}
		script, err := skiplock.InstallSQL(&skiplock.InstallSQLOpts{Schema: *schema, FromVersion: int32(*from)})
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, script)
		return err
	case "ui":
		return runUI(ctx, args, os.Getenv, stdout, stderr, nil)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func printStats(ctx context.Context, conn *pgx.Conn, schema string, w io.Writer) error {
	fn := pgx.Identifier{"jobs_stats"}
	if schema != "" {
		fn = pgx.Identifier{schema, "jobs_stats"}
	}
	rows, err := conn.Query(ctx, "SELECT queue, state::text, jobs, oldest_ready_age FROM "+fn.Sanitize()+"()")
	if err != nil {
		return fmt.Errorf("failed to read stats: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tSTATE\tJOBS\tOLDEST READY")
	var queue, state string
	var jobs int64
	var age *time.Duration
	_, err = pgx.ForEachRow(rows, []any{&queue, &state, &jobs, &age}, func() error {
		ageText := "-"
		if age != nil {
			ageText = age.Round(time.Millisecond).String()
		}
		_, err := fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", queue, state, jobs, ageText)
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to read stats: %w", err)
	}
	return tw.Flush()
}
