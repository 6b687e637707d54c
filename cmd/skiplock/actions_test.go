package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// states lists the jobs' states in id order.
func states(t *testing.T, db *pgtest.TestDB) string {
	t.Helper()
	return pgtest.QueryOne[string](t, db.Conn, "SELECT coalesce(string_agg(state::text, ' ' ORDER BY id), '') FROM jobs")
}

func TestBulkActions(t *testing.T) {
	t.Parallel()

	t.Run("RetryByIDs", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		a := deadJob(t, db, "mail", "email", "boom")
		deadJob(t, db, "mail", "email", "boom")
		if out := cli(t, db.URL, "retry", fmt.Sprint(a)).ok(t); out != "retried 1 jobs\n" {
			t.Fatalf("retry ID: %q", out)
		}
		if s := states(t, db); s != "queued dead" {
			t.Fatalf("states %q, want job 1 retried only", s)
		}
		// Job 1 is no longer dead, 99 does not exist: nothing to do is "not found".
		cli(t, db.URL, "retry", fmt.Sprint(a), "99").fails(t, exitNotFound, "none of the jobs [1 99] is dead")
	})

	// On a shard, dead jobs whose id names another shard (created before jobs_set_shard)
	// are left alone, and the server's WARNING saying so reaches stderr.
	t.Run("RetryLeavesJobsOfOtherShards", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		deadJob(t, db, "mail", "email", "boom") // id 1: names shard 1
		pgtest.MustExec(t, db.Conn, "SELECT jobs_set_shard(5)")
		r := cli(t, db.URL, "retry", "--queue", "mail", "--yes")
		if out := r.ok(t); out != "retried 0 jobs\n" {
			t.Fatalf("retry --yes: %q", out)
		}
		want := "skiplock: warning: jobs_retry_many: left 1 matching jobs alone (the lowest id 1): their ids name another shard than this one, 5\n" +
			"skiplock: hint: A router would send their completions to another shard. Enqueue their payloads again to run them here under new ids.\n"
		if r.stderr != want {
			t.Fatalf("stderr %q, want %q", r.stderr, want)
		}
		if s := states(t, db); s != "dead" {
			t.Fatalf("states %q, want the job left dead", s)
		}
	})

	// The filter-wide retry of dead jobs: refused without --yes when stdin is not a
	// terminal, counted by --dry-run, done with --yes, confirmed on a terminal.
	t.Run("FilterWideRetryOfDeadJobs", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		for range 3 {
			deadJob(t, db, "mail", "email", "boom")
		}
		deadJob(t, db, "other", "email", "boom")

		cli(t, db.URL, "retry", "--queue", "mail").fails(t, exitUsage,
			`refusing to retry 3 dead jobs of queue "mail" without --yes (stdin is not a terminal`)
		if s := states(t, db); s != "dead dead dead dead" {
			t.Fatalf("a refused retry changed the jobs: %s", s)
		}

		var dry struct {
			Action string `json:"action"`
			DryRun bool   `json:"dry_run"`
			Jobs   int    `json:"jobs"`
		}
		cli(t, db.URL, "retry", "--queue", "mail", "--dry-run", "-o", "json").decode(t, &dry)
		if dry.Action != "retry" || !dry.DryRun || dry.Jobs != 3 {
			t.Fatalf("retry --dry-run = %+v, want 3", dry)
		}
		if s := states(t, db); s != "dead dead dead dead" {
			t.Fatalf("a dry run changed the jobs: %s", s)
		}

		// On a terminal, anything but yes keeps the jobs.
		url := db.URL
		r := cliWith(t, t.Context(), cliOpts{databaseURL: &url, terminal: true, stdin: "n\n"}, "retry", "--queue", "mail")
		r.fails(t, exitFailed, "not confirmed")
		if r.stderr[:len(`retry 3 dead jobs of queue "mail"? [y/N]`)] != `retry 3 dead jobs of queue "mail"? [y/N]` {
			t.Fatalf("prompt %q", r.stderr)
		}

		if out := cli(t, db.URL, "retry", "--queue", "mail", "--yes").ok(t); out != "retried 3 jobs\n" {
			t.Fatalf("retry --yes: %q", out)
		}
		if s := states(t, db); s != "queued queued queued dead" {
			t.Fatalf("states %q, want the mail queue's jobs retried", s)
		}
		out := cliWith(t, t.Context(), cliOpts{databaseURL: &url, terminal: true, stdin: "yes\n"}, "retry").ok(t)
		if out != "retried 1 jobs\n" || states(t, db) != "queued queued queued queued" {
			t.Fatalf("retry confirmed on a terminal: %q, states %s", out, states(t, db))
		}
		// Nothing matching needs no confirmation.
		if out := cli(t, db.URL, "retry").ok(t); out != "retried 0 jobs\n" {
			t.Fatalf("retry with nothing dead: %q", out)
		}
	})

	t.Run("FilterWideRetryGoesPastOneBatch", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		pgtest.MustExec(t, db.Conn, `INSERT INTO jobs (kind, state, attempts, max_attempts, finished_at)
			SELECT 'k', 'dead', 1, 1, now() FROM generate_series(1, 2500)`)
		var got struct {
			Jobs int `json:"jobs"`
		}
		cli(t, db.URL, "retry", "--dry-run", "-o", "json").decode(t, &got)
		if got.Jobs != 2500 {
			t.Fatalf("dry run counted %d, want 2500 (three pages of jobs_list)", got.Jobs)
		}
		cli(t, db.URL, "retry", "--yes", "-o", "json").decode(t, &got)
		if got.Jobs != 2500 {
			t.Fatalf("retried %d, want 2500 in three batches", got.Jobs)
		}
	})

	t.Run("CancelAndDelete", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		q1 := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k', queue => 'a')")
		pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k', queue => 'a')")
		pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k2', queue => 'b')")
		if out := cli(t, db.URL, "cancel", fmt.Sprint(q1)).ok(t); out != "cancelled 1 jobs\n" {
			t.Fatalf("cancel ID: %q", out)
		}
		if out := cli(t, db.URL, "cancel", "--kind", "k", "--yes").ok(t); out != "cancelled 1 jobs\n" {
			t.Fatalf("cancel --kind k: %q", out)
		}
		if s := states(t, db); s != "cancelled cancelled queued" {
			t.Fatalf("states %q", s)
		}
		if out := cli(t, db.URL, "delete", "--state", "cancelled", "--dry-run").ok(t); out != "would delete 2 jobs\n" {
			t.Fatalf("delete --dry-run: %q", out)
		}
		cli(t, db.URL, "delete", "--queue", "a").fails(t, exitUsage, "refusing to delete 2 done or dead or cancelled jobs")
		if out := cli(t, db.URL, "delete", "--queue", "a", "--yes").ok(t); out != "deleted 2 jobs\n" {
			t.Fatalf("delete --yes: %q", out)
		}
		if s := states(t, db); s != "queued" {
			t.Fatalf("states %q, want the queued job of b only", s)
		}
		cli(t, db.URL, "delete", "3").fails(t, exitNotFound, "none of the jobs [3] is done or dead or cancelled")
	})

	t.Run("BadInputIsUsage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "retry", "--state", "queued").fails(t, exitUsage, "--state may only hold dead, cancelled")
		cli(t, db.URL, "cancel", "x").fails(t, exitUsage, "job ID must be an integer")
		cli(t, db.URL, "delete", "1", "--queue", "a").fails(t, exitUsage, "not both")
	})
}

// TestFilterWideRetryEndsWhileWorkersFail: `skiplock retry --queue Q --yes` retries the jobs
// that were dead when it started, each at most once, and ends, while workers fail every
// retried job back to dead at once (calling jobs_retry_many until it returns 0 went on, and
// retried each job over and over, as long as the workers kept up).
func TestFilterWideRetryEndsWhileWorkersFail(t *testing.T) {
	t.Parallel()
	db := setup(t)
	const dead = 5000
	pgtest.MustExec(t, db.Conn, `SELECT jobs_enqueue_many(array_fill('deliver'::text, ARRAY[$1::int]),
		queues => array_fill('flaky'::text, ARRAY[$1::int]), max_attempts => array_fill(1, ARRAY[$1::int]))`, dead)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_fail(c.id, c.attempt, 'boom') FROM jobs_claim('w', $1, ARRAY['flaky']) c`, dead)
	deadJob(t, db, "other", "deliver", "boom")

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		conn := db.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var n int64
				err := conn.QueryRow(ctx, `SELECT count(jobs_fail(c.id, c.attempt, 'instant failure'))
					FROM jobs_claim('fast-failer', 250, ARRAY['flaky']) c`).Scan(&n)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("fast-failing worker: %v", err)
					}
					return
				}
				if n == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	out := cli(t, db.URL, "retry", "--queue", "flaky", "--yes", "-o", "json")
	var res struct{ Jobs int }
	out.decode(t, &res)
	if res.Jobs < 1 || res.Jobs > dead {
		t.Errorf("retry --queue flaky retried %d jobs, want 1 to %d: the jobs dead when it started, each at most once", res.Jobs, dead)
	}
	if n := pgtest.QueryOne[int64](t, db.Conn, `SELECT count(*) FROM jobs WHERE queue = 'flaky' AND attempts > 2`); n != 0 {
		t.Errorf("%d jobs were retried more than once by one retry", n)
	}
	if s := pgtest.QueryOne[string](t, db.Conn, `SELECT state::text FROM jobs WHERE queue = 'other'`); s != "dead" {
		t.Errorf("the job of another queue is %s, want dead (untouched)", s)
	}
}

// TestFilterWideRetryOfTwoStatesActsOnEachJobOnce: `skiplock retry --state dead,cancelled`
// retries each job at most once (its help says so), even when a retried job's handler cancels
// it (the fenced jobs_cancel) before the command reaches the cancelled jobs. The trigger
// stands in for that worker: a job queued again from dead is at once claimed and cancelled.
func TestFilterWideRetryOfTwoStatesActsOnEachJobOnce(t *testing.T) {
	t.Parallel()
	db := setup(t)
	id := deadJob(t, db, "twice", "deliver", "boom")
	pgtest.MustExec(t, db.Conn, `CREATE FUNCTION worker_cancels() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF OLD.state = 'dead' AND NEW.state = 'queued' THEN
				NEW.state := 'cancelled';
				NEW.attempts := OLD.attempts + 1;
				NEW.finished_at := now();
			END IF;
			RETURN NEW;
		END $$`)
	pgtest.MustExec(t, db.Conn, `CREATE TRIGGER worker_cancels BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION worker_cancels()`)

	out := cli(t, db.URL, "retry", "--state", "dead,cancelled", "--queue", "twice", "--yes", "-o", "json")
	var res struct{ Jobs int }
	out.decode(t, &res)
	state := pgtest.QueryOne[string](t, db.Conn, "SELECT state::text FROM jobs WHERE id = $1", id)
	if res.Jobs != 1 || state != "cancelled" {
		t.Errorf("retry --state dead,cancelled of one job: retried %d, the job is %s; want 1 and cancelled (retried once, cancelled by its worker)", res.Jobs, state)
	}
}

// TestFilterWideCancelOfTwoStatesMissesNoJob: `skiplock cancel --state queued,running`
// cancels a job that matched all along, even when it went from running back to queued (a
// worker's jobs_fail) after the command read the queued jobs and before it read the running
// ones. The trigger stands in for that worker: it fails the running job as the command
// cancels the queued one.
func TestFilterWideCancelOfTwoStatesMissesNoJob(t *testing.T) {
	t.Parallel()
	db := setup(t)
	queued := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('deliver', queue => 'both')")
	running := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('deliver', queue => 'both', run_at => now() - interval '1 hour')")
	pgtest.MustExec(t, db.Conn, "SELECT jobs_claim('w', 1, ARRAY['both'])")
	if s := pgtest.QueryOne[string](t, db.Conn, "SELECT state::text FROM jobs WHERE id = $1", running); s != "running" {
		t.Fatalf("job %d is %s, want running", running, s)
	}
	pgtest.MustExec(t, db.Conn, `CREATE FUNCTION worker_fails() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			UPDATE jobs SET state = 'queued', lease_expires_at = NULL, lease_role = NULL
			WHERE id = `+strconv.FormatInt(running, 10)+` AND state = 'running';
			RETURN NEW;
		END $$`)
	pgtest.MustExec(t, db.Conn, `CREATE TRIGGER worker_fails AFTER UPDATE ON jobs FOR EACH ROW
		WHEN (OLD.id = `+strconv.FormatInt(queued, 10)+` AND NEW.state = 'cancelled') EXECUTE FUNCTION worker_fails()`)

	out := cli(t, db.URL, "cancel", "--state", "queued,running", "--queue", "both", "--yes", "-o", "json")
	var res struct{ Jobs int }
	out.decode(t, &res)
	if s := pgtest.QueryOne[string](t, db.Conn, "SELECT state::text FROM jobs WHERE id = $1", running); s != "cancelled" || res.Jobs != 2 {
		t.Errorf("cancel --state queued,running: cancelled %d jobs, job %d (running, then queued again) is %s; want 2 and cancelled", res.Jobs, running, s)
	}
}

// TestCancelWaitingJobs: cancel takes --state waiting, by filter and by id.
func TestCancelWaitingJobs(t *testing.T) {
	t.Parallel()
	db := setup(t)
	parent := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('p', queue => 'w')")
	a := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('c', queue => 'w', depends_on => ARRAY[$1::bigint])", parent)
	pgtest.MustExec(t, db.Conn, "SELECT jobs_enqueue('c', queue => 'w', depends_on => ARRAY[$1::bigint])", parent)
	if out := cli(t, db.URL, "cancel", fmt.Sprint(a), "--state", "waiting").ok(t); out != "cancelled 1 jobs\n" {
		t.Fatalf("cancel ID --state waiting: %q", out)
	}
	if out := cli(t, db.URL, "cancel", "--state", "waiting", "--queue", "w", "--yes").ok(t); out != "cancelled 1 jobs\n" {
		t.Fatalf("cancel --state waiting --queue w: %q", out)
	}
	if s := states(t, db); s != "queued cancelled cancelled" {
		t.Fatalf("states %q, want the parent queued and both children cancelled", s)
	}
}
