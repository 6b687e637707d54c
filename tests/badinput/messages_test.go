package badinput

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
)

// TestInvalidArgumentMessages pins the exact wording of every error a bad argument gets, as a
// psql user reads it: the other tests check the SQLSTATE, the COLUMN field and the message's
// '<function>: <parameter> ' prefix, this one the whole message. Each call aims at the
// fixture's running job 1 (held at attempt 1) or would claim, enqueue or prune if let
// through, so the fixture's checksum shows a call that acted before it validated.
//
// These were the calls of the psql suite's validation.sql, which this test replaces: the
// psql suite keeps only the documented examples (tests/regress/sql/sql_api_examples.sql).
func TestInvalidArgumentMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	t.Run("ChecksumSeesAChange", func(t *testing.T) {
		// A checksum blind to changes would pass every case below.
		tx, err := f.Connect(t).Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
		if _, err := tx.Exec(t.Context(), "SELECT jobs_enqueue('k')"); err != nil {
			t.Fatal(err)
		}
		if jobstest.TableChecksum(t, tx) == f.before {
			t.Fatal("an enqueue left the fixture's checksum as it was")
		}
	})
	for _, tc := range []struct{ sql, message string }{
		{`SELECT jobs_enqueue(NULL)`, `jobs_enqueue: kind must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_set_concurrency('q', 0)`, `jobs_set_concurrency: max_running must be NULL (no limit) or at least 1`},
		{`SELECT jobs_set_concurrency('q', NULL, 0, fair => true)`, `jobs_set_concurrency: per_key must be NULL (no limit) or at least 1`},
		{`SELECT jobs_set_concurrency('', NULL, ordered => true)`, `jobs_set_concurrency: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_set_rate_limit('q', 0, '1 second', per_key => true)`, `jobs_set_rate_limit: max_starts must be NULL (no limit) or at least 1`},
		{`SELECT jobs_set_rate_limit('q', 3, '0 seconds', per_key => true)`, `jobs_set_rate_limit: per must be a positive interval of at most 100 years`},
		{`SELECT jobs_set_rate_limit('q', 3, '1 second', per_key => NULL)`, `jobs_set_rate_limit: per_key must be true or false`},
		{`SELECT jobs_enqueue('')`, `jobs_enqueue: kind must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue(repeat('k', 201))`, `jobs_enqueue: kind must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue(repeat('é', 101))`, `jobs_enqueue: kind must be a non-empty string of at most 200 bytes`}, // 101 characters, 202 bytes
		{`SELECT jobs_enqueue('k', payload => NULL)`, `jobs_enqueue: payload must not be NULL (use '{}' for no payload)`},
		{`SELECT jobs_enqueue('k', queue => NULL)`, `jobs_enqueue: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue('k', queue => '')`, `jobs_enqueue: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue('k', queue => repeat('q', 201))`, `jobs_enqueue: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue('k', run_at => NULL)`, `jobs_enqueue: run_at must be a finite timestamp`},
		{`SELECT jobs_enqueue('k', run_at => 'infinity')`, `jobs_enqueue: run_at must be a finite timestamp`},
		{`SELECT jobs_enqueue('k', run_at => '-infinity')`, `jobs_enqueue: run_at must be a finite timestamp`},
		{`SELECT jobs_enqueue('k', priority => NULL)`, `jobs_enqueue: priority must not be NULL`},
		{`SELECT jobs_enqueue('k', max_attempts => NULL)`, `jobs_enqueue: max_attempts must be at least 1`},
		{`SELECT jobs_enqueue('k', max_attempts => 0)`, `jobs_enqueue: max_attempts must be at least 1`},
		{`SELECT jobs_enqueue('k', max_attempts => -1)`, `jobs_enqueue: max_attempts must be at least 1`},
		{`SELECT jobs_enqueue('k', unique_key => '')`, `jobs_enqueue: unique_key must be NULL or a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue('k', unique_key => repeat('u', 201))`, `jobs_enqueue: unique_key must be NULL or a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue('k', meta => '[]')`, `jobs_enqueue: meta must be NULL or a JSON object`},
		{`SELECT jobs_enqueue('k', meta => '"traceparent"')`, `jobs_enqueue: meta must be NULL or a JSON object`},
		{`SELECT jobs_enqueue('k', meta => 'null')`, `jobs_enqueue: meta must be NULL or a JSON object`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], metas => ARRAY['{}']::jsonb[])`, `jobs_enqueue_many: metas must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], metas => '{{"{}"},{"{}"}}'::jsonb[])`, `jobs_enqueue_many: metas must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], metas => ARRAY[NULL, '1']::jsonb[])`, `jobs_enqueue_many: metas[2] must be NULL or a JSON object`},
		{`SELECT jobs_enqueue('k', notify => NULL)`, `jobs_enqueue: notify must not be NULL`},
		{`SELECT jobs_enqueue('k', unique_key => 'held', on_duplicate => NULL)`, `jobs_enqueue: on_duplicate must be 'keep' or 'replace'`},
		{`SELECT jobs_enqueue('k', unique_key => 'held', on_duplicate => 'Replace')`, `jobs_enqueue: on_duplicate must be 'keep' or 'replace'`},
		{`SELECT jobs_enqueue('k', unique_key => 'held', on_duplicate => 'update')`, `jobs_enqueue: on_duplicate must be 'keep' or 'replace'`},
		{`SELECT jobs_enqueue('k', on_duplicate => 'replace')`, `jobs_enqueue: on_duplicate must be 'keep' when unique_key is NULL (a job without a key has no duplicate)`},
		{`SELECT jobs_enqueue('other', queue => 'running', unique_key => 'held', on_duplicate => 'replace')`, `jobs_enqueue: kind must be 'k', the kind of job 1, which holds unique_key 'held', to replace it (on_duplicate 'replace')`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'other'], queues => ARRAY['x', 'running'], unique_keys => ARRAY['a', 'held'], on_duplicates => ARRAY['replace', 'replace'])`, `jobs_enqueue_many: kinds[2] must be 'k', the kind of job 1, which holds unique_key 'held', to replace it (on_duplicate 'replace')`},
		{`SELECT jobs_enqueue('k', unique_key => 'held', unique_for => '0')`, `jobs_enqueue: unique_for must be NULL or a positive interval of at most 100 years`},
		{`SELECT jobs_enqueue('k', unique_key => 'held', unique_for => '-1 second')`, `jobs_enqueue: unique_for must be NULL or a positive interval of at most 100 years`},
		{`SELECT jobs_enqueue('k', unique_key => 'held', unique_for => '1 day -25 hours')`, `jobs_enqueue: unique_for must be NULL or a positive interval of at most 100 years`},
		{`SELECT jobs_enqueue('k', unique_key => 'held', unique_for => '101 years')`, `jobs_enqueue: unique_for must be NULL or a positive interval of at most 100 years`},
		{`SELECT jobs_enqueue('k', unique_for => '1 hour')`, `jobs_enqueue: unique_for must be NULL when unique_key is NULL (it is how long the key stays taken)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['held', 'x'], on_duplicates => ARRAY['keep', 'Replace'])`, `jobs_enqueue_many: on_duplicates[2] must be 'keep' or 'replace'`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['held', 'x'], on_duplicates => ARRAY['keep'])`, `jobs_enqueue_many: on_duplicates must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['held', NULL], on_duplicates => ARRAY['replace', 'replace'])`, `jobs_enqueue_many: on_duplicates[2] must be 'keep' when unique_keys[2] is NULL (a job without a key has no duplicate)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['held', 'x'], unique_fors => ARRAY['1 hour', '0']::interval[])`, `jobs_enqueue_many: unique_fors[2] must be NULL or a positive interval of at most 100 years`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_fors => ARRAY[NULL, '1 hour']::interval[])`, `jobs_enqueue_many: unique_fors[2] must be NULL when unique_keys[2] is NULL (it is how long the key stays taken)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_fors => ARRAY[['1 hour'], ['1 hour']]::interval[])`, `jobs_enqueue_many: unique_fors must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k'], notify => NULL)`, `jobs_enqueue_many: notify must not be NULL`},
		{`SELECT jobs_notify(NULL)`, `jobs_notify: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_notify('')`, `jobs_notify: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_notify(repeat('q', 201))`, `jobs_notify: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(NULL)`, `jobs_enqueue_many: kinds must not be NULL`},
		{`SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[100001]))`, `jobs_enqueue_many: kinds must have at most 100000 elements`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], payloads => ARRAY['{}']::jsonb[])`, `jobs_enqueue_many: payloads must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => ARRAY['a', 'b', 'c'])`, `jobs_enqueue_many: queues must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[]::timestamptz[])`, `jobs_enqueue_many: run_ats must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], priorities => ARRAY[1])`, `jobs_enqueue_many: priorities must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], max_attempts => ARRAY[1])`, `jobs_enqueue_many: max_attempts must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['u'])`, `jobs_enqueue_many: unique_keys must be NULL or have as many elements as kinds (2)`},
		{`SELECT jobs_enqueue_many('{{k},{k}}'::text[])`, `jobs_enqueue_many: kinds must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], payloads => '{{"{}"},{"{}"}}'::jsonb[])`, `jobs_enqueue_many: payloads must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => '{{a},{b}}'::text[])`, `jobs_enqueue_many: queues must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[ARRAY[now()], ARRAY[now()]])`, `jobs_enqueue_many: run_ats must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], priorities => '{{1},{2}}'::integer[])`, `jobs_enqueue_many: priorities must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], max_attempts => '{{1},{2}}'::integer[])`, `jobs_enqueue_many: max_attempts must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => '{{u},{v}}'::text[])`, `jobs_enqueue_many: unique_keys must be a one-dimensional array`},
		{`SELECT jobs_enqueue_many(ARRAY['k', NULL])`, `jobs_enqueue_many: kinds[2] must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(ARRAY['k', ''])`, `jobs_enqueue_many: kinds[2] must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(ARRAY['k', repeat('k', 201)])`, `jobs_enqueue_many: kinds[2] must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], payloads => ARRAY['{}', NULL]::jsonb[])`, `jobs_enqueue_many: payloads[2] must not be NULL (use '{}' for no payload)`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => ARRAY['a', NULL])`, `jobs_enqueue_many: queues[2] must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => ARRAY['a', ''])`, `jobs_enqueue_many: queues[2] must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[now(), NULL])`, `jobs_enqueue_many: run_ats[2] must be a finite timestamp`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[now(), 'infinity'])`, `jobs_enqueue_many: run_ats[2] must be a finite timestamp`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[now(), '-infinity'])`, `jobs_enqueue_many: run_ats[2] must be a finite timestamp`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], priorities => ARRAY[0, NULL])`, `jobs_enqueue_many: priorities[2] must not be NULL`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], max_attempts => ARRAY[1, 0])`, `jobs_enqueue_many: max_attempts[2] must be at least 1`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['u', ''])`, `jobs_enqueue_many: unique_keys[2] must be NULL or a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY[NULL, repeat('u', 201)])`, `jobs_enqueue_many: unique_keys[2] must be NULL or a non-empty string of at most 200 bytes`},
		{`SELECT jobs_enqueue_many(ARRAY['k', 'k', NULL, ''])`, `jobs_enqueue_many: kinds[3] must be a non-empty string of at most 200 bytes`},
		{`SELECT * FROM jobs_claim(NULL)`, `jobs_claim: worker must be a non-empty string of at most 200 bytes`},
		{`SELECT * FROM jobs_claim('')`, `jobs_claim: worker must be a non-empty string of at most 200 bytes`},
		{`SELECT * FROM jobs_claim(repeat('w', 201))`, `jobs_claim: worker must be a non-empty string of at most 200 bytes`},
		{`SELECT * FROM jobs_claim('w', max_jobs => NULL)`, `jobs_claim: max_jobs must be between 1 and 10000`},
		{`SELECT * FROM jobs_claim('w', max_jobs => 0)`, `jobs_claim: max_jobs must be between 1 and 10000`},
		{`SELECT * FROM jobs_claim('w', max_jobs => 10001)`, `jobs_claim: max_jobs must be between 1 and 10000`},
		{`SELECT * FROM jobs_claim('w', queues => '{}')`, `jobs_claim: queues must be NULL (all queues) or a non-empty array without NULLs`},
		{`SELECT * FROM jobs_claim('w', queues => ARRAY['default', NULL])`, `jobs_claim: queues must be NULL (all queues) or a non-empty array without NULLs`},
		{`SELECT * FROM jobs_claim('w', queues => '{{default}}'::text[])`, `jobs_claim: queues must be a one-dimensional array`},
		{`SELECT * FROM jobs_claim('w', lease => NULL)`, `jobs_claim: lease must be a positive interval of at most 100 years`},
		{`SELECT * FROM jobs_claim('w', lease => '0')`, `jobs_claim: lease must be a positive interval of at most 100 years`},
		{`SELECT * FROM jobs_claim('w', lease => '-1 second')`, `jobs_claim: lease must be a positive interval of at most 100 years`},
		{`SELECT * FROM jobs_claim('w', lease => '100 years 1 microsecond')`, `jobs_claim: lease must be a positive interval of at most 100 years`},
		{`SELECT * FROM jobs_claim('w', lease => '178000000 years')`, `jobs_claim: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_complete(NULL, 1)`, `jobs_complete: id must not be NULL`},
		{`SELECT jobs_complete(1, NULL)`, `jobs_complete: attempt must not be NULL`},
		{`SELECT jobs_fail(NULL, 1, 'e')`, `jobs_fail: id must not be NULL`},
		{`SELECT jobs_fail(1, NULL, 'e')`, `jobs_fail: attempt must not be NULL`},
		{`SELECT jobs_fail(1, 1, NULL)`, `jobs_fail: error must not be NULL`},
		{`SELECT jobs_fail(1, 1, 'e', 'infinity')`, `jobs_fail: retry_at must be NULL or a finite timestamp`},
		{`SELECT jobs_fail(1, 1, 'e', '-infinity')`, `jobs_fail: retry_at must be NULL or a finite timestamp`},
		{`SELECT jobs_heartbeat(NULL, 1)`, `jobs_heartbeat: id must not be NULL`},
		{`SELECT jobs_heartbeat(1, NULL)`, `jobs_heartbeat: attempt must not be NULL`},
		{`SELECT jobs_heartbeat(1, 1, lease => NULL)`, `jobs_heartbeat: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_heartbeat(1, 1, lease => '0')`, `jobs_heartbeat: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_heartbeat(1, 1, lease => '-5 minutes')`, `jobs_heartbeat: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_heartbeat(1, 1, lease => '100 years 1 microsecond')`, `jobs_heartbeat: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_heartbeat(1, 1, lease => '178000000 years')`, `jobs_heartbeat: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_snooze(NULL, 1, now())`, `jobs_snooze: id must not be NULL`},
		{`SELECT jobs_snooze(1, NULL, now())`, `jobs_snooze: attempt must not be NULL`},
		{`SELECT jobs_snooze(1, 1, NULL)`, `jobs_snooze: run_at must be a finite timestamp`},
		{`SELECT jobs_snooze(1, 1, 'infinity')`, `jobs_snooze: run_at must be a finite timestamp`},
		{`SELECT jobs_snooze(1, 1, '-infinity')`, `jobs_snooze: run_at must be a finite timestamp`},
		{`SELECT jobs_complete_many(NULL, ARRAY[1])`, `jobs_complete_many: ids must not be NULL`},
		{`SELECT jobs_complete_many(ARRAY[1]::bigint[], NULL)`, `jobs_complete_many: attempts must not be NULL`},
		{`SELECT jobs_complete_many(ARRAY[1]::bigint[], ARRAY[1, 1])`, `jobs_complete_many: attempts must have as many elements as ids`},
		{`SELECT jobs_complete_many(ARRAY[1, NULL]::bigint[], ARRAY[1, 1])`, `jobs_complete_many: ids must not contain NULL`},
		{`SELECT jobs_complete_many(ARRAY[1]::bigint[], ARRAY[NULL]::integer[])`, `jobs_complete_many: attempts must not contain NULL`},
		{`SELECT jobs_complete_many(array_fill(1::bigint, ARRAY[100001]), array_fill(1, ARRAY[100001]))`, `jobs_complete_many: ids must have at most 100000 elements`},
		{`SELECT jobs_complete_many(ARRAY[ARRAY[1]]::bigint[], ARRAY[1])`, `jobs_complete_many: ids must be a one-dimensional array`},
		{`SELECT jobs_complete_many(ARRAY[1]::bigint[], ARRAY[ARRAY[1]])`, `jobs_complete_many: attempts must be a one-dimensional array`},
		{`SELECT * FROM jobs_complete_and_claim('w', NULL, ARRAY[1])`, `jobs_complete_and_claim: ids must not be NULL`},
		{`SELECT * FROM jobs_complete_and_claim('w', ARRAY[1]::bigint[], ARRAY[1, 1])`, `jobs_complete_and_claim: attempts must have as many elements as ids`},
		{`SELECT * FROM jobs_complete_and_claim(NULL, '{}', '{}')`, `jobs_complete_and_claim: worker must be a non-empty string of at most 200 bytes`},
		{`SELECT * FROM jobs_complete_and_claim('w', '{}', '{}', -1)`, `jobs_complete_and_claim: max_jobs must be between 0 and 10000`},
		{`SELECT * FROM jobs_complete_and_claim('w', '{}', '{}', queues => ARRAY['default', NULL])`, `jobs_complete_and_claim: queues must be NULL (all queues) or a non-empty array without NULLs`},
		{`SELECT * FROM jobs_complete_and_claim('w', '{}', '{}', queues => '{{default}}'::text[])`, `jobs_complete_and_claim: queues must be a one-dimensional array`},
		{`SELECT * FROM jobs_complete_and_claim('w', '{}', '{}', lease => '0')`, `jobs_complete_and_claim: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_heartbeat_many(NULL, ARRAY[1])`, `jobs_heartbeat_many: ids must not be NULL`},
		{`SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], NULL)`, `jobs_heartbeat_many: attempts must not be NULL`},
		{`SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[1, 1])`, `jobs_heartbeat_many: attempts must have as many elements as ids`},
		{`SELECT jobs_heartbeat_many(ARRAY[1, NULL]::bigint[], ARRAY[1, 1])`, `jobs_heartbeat_many: ids must not contain NULL`},
		{`SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[NULL]::integer[])`, `jobs_heartbeat_many: attempts must not contain NULL`},
		{`SELECT jobs_heartbeat_many(array_fill(1::bigint, ARRAY[100001]), array_fill(1, ARRAY[100001]))`, `jobs_heartbeat_many: ids must have at most 100000 elements`},
		{`SELECT jobs_heartbeat_many(ARRAY[ARRAY[1]]::bigint[], ARRAY[1])`, `jobs_heartbeat_many: ids must be a one-dimensional array`},
		{`SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[ARRAY[1]])`, `jobs_heartbeat_many: attempts must be a one-dimensional array`},
		{`SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[1], lease => NULL)`, `jobs_heartbeat_many: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[1], lease => '0')`, `jobs_heartbeat_many: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[1], lease => '100 years 1 microsecond')`, `jobs_heartbeat_many: lease must be a positive interval of at most 100 years`},
		{`SELECT jobs_cancel(NULL)`, `jobs_cancel: id must not be NULL`},
		{`SELECT jobs_retry(NULL)`, `jobs_retry: id must not be NULL`},
		{`SELECT jobs_cron_next(NULL, now())`, `jobs_cron_next: cron must be a cron expression of at most 1000 bytes`},
		{`SELECT jobs_cron_next('0 24 * * *', now())`, `jobs_cron_next: cron field hour: 24 is out of range 0-23 in '0 24 * * *'`},
		{`SELECT jobs_cron_next('0 99999999999 * * *', now())`, `jobs_cron_next: cron field hour: 99999999999 is out of range 0-23 in '0 99999999999 * * *'`},
		{`SELECT jobs_cron_next('0 0 * JUNE *', now())`, `jobs_cron_next: cron field month: 'JUNE' is not a number or name in '0 0 * JUNE *'`},
		{`SELECT jobs_cron_next('0 0 * * 5-1', now())`, `jobs_cron_next: cron field day-of-week: range '5-1' starts after it ends in '0 0 * * 5-1'`},
		{`SELECT jobs_cron_next('*/61 * * * *', now())`, `jobs_cron_next: cron field minute: step '61' must be a number from 1 to 59 in '*/61 * * * *'`},
		{`SELECT jobs_cron_next('0 0 * *', now())`, `jobs_cron_next: cron must have 5 fields (minute hour day-of-month month day-of-week), got 4 in '0 0 * *'`},
		{`SELECT jobs_cron_next('@every 1 month', now())`, `jobs_cron_next: cron @every: '1 mon' must be a whole number of seconds from 1 second to 100 years, without months or years`},
		{`SELECT jobs_cron_next('* * * * *', now(), 'Mars/Base')`, `jobs_cron_next: timezone 'Mars/Base' is not a known time zone (use an IANA name such as 'Europe/Berlin')`},
		{`SELECT jobs_cron_next('* * * * *', NULL)`, `jobs_cron_next: after must be a finite timestamp`},
		{`SELECT jobs_schedule('', '* * * * *', 'k')`, `jobs_schedule: name must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_schedule('s', '0 0 31 4 *', 'k')`, `jobs_schedule: cron '0 0 31 4 *' never runs (no run within ten years)`},
		{`SELECT jobs_schedule('s', '* * * * *', 'k', enabled => NULL)`, `jobs_schedule: enabled must not be NULL`},
		{`SELECT jobs_unschedule(NULL)`, `jobs_unschedule: name must not be NULL`},
		{`SELECT jobs_schedule_run(NULL)`, `jobs_schedule_run: name must not be NULL`},
		{`SELECT jobs_schedule_run('no such schedule')`, `jobs_schedule_run: name 'no such schedule' is not a schedule`},
		{`SELECT jobs_schedule_set_enabled(NULL, true)`, `jobs_schedule_set_enabled: name must not be NULL`},
		{`SELECT jobs_schedule_set_enabled('fixed', NULL)`, `jobs_schedule_set_enabled: enabled must not be NULL`},
		{`SELECT jobs_schedule_set_enabled('it''s', false)`, `jobs_schedule_set_enabled: name 'it''s' is not a schedule`},
		{`SELECT * FROM jobs_inspect(NULL)`, `jobs_inspect: id must not be NULL`},
		{`SELECT * FROM jobs_list(max_jobs => 0)`, `jobs_list: max_jobs must be between 1 and 1000`},
		{`SELECT * FROM jobs_list(max_jobs => 1001)`, `jobs_list: max_jobs must be between 1 and 1000`},
		{`SELECT * FROM jobs_list(max_jobs => NULL)`, `jobs_list: max_jobs must be between 1 and 1000`},
		{`SELECT * FROM jobs_get(NULL)`, `jobs_get: id must not be NULL`},
		{`SELECT jobs_prune(older_than => NULL)`, `jobs_prune: older_than must be an interval >= 0`},
		{`SELECT jobs_prune(older_than => '-1 second')`, `jobs_prune: older_than must be an interval >= 0`},
		{`SELECT jobs_prune(older_than => '0', include_dead => NULL)`, `jobs_prune: include_dead must not be NULL`},
		{`SELECT jobs_prune(older_than => '0', max_jobs => NULL)`, `jobs_prune: max_jobs must be at least 1`},
		{`SELECT jobs_prune(older_than => '0', max_jobs => 0)`, `jobs_prune: max_jobs must be at least 1`},
		{`SELECT jobs_retry_many(states => NULL)`, `jobs_retry_many: states must not be NULL`},
		{`SELECT jobs_retry_many(states => '{}')`, `jobs_retry_many: states must not be empty`},
		{`SELECT jobs_retry_many(states => '{dead, NULL}')`, `jobs_retry_many: states must not contain NULL`},
		{`SELECT jobs_retry_many(states => '{queued}')`, `jobs_retry_many: states may only hold dead, cancelled`},
		{`SELECT jobs_retry_many(max_jobs => NULL)`, `jobs_retry_many: max_jobs must be at least 1`},
		{`SELECT jobs_cancel_many(states => '{dead}')`, `jobs_cancel_many: states may only hold waiting, queued, running`},
		{`SELECT jobs_cancel_many(max_jobs => 0)`, `jobs_cancel_many: max_jobs must be at least 1`},
		{`SELECT jobs_delete_many(states => '{running}')`, `jobs_delete_many: states may only hold done, dead, cancelled`},
		{`SELECT jobs_delete_many(max_jobs => 0)`, `jobs_delete_many: max_jobs must be at least 1`},
		{`SELECT jobs_maintain(NULL)`, `jobs_maintain: max_jobs must be at least 1`},
		{`SELECT jobs_backoff(NULL)`, `jobs_backoff: attempt must be at least 1`},
		{`SELECT jobs_backoff(0)`, `jobs_backoff: attempt must be at least 1`},
		{`SELECT jobs_backoff(-1)`, `jobs_backoff: attempt must be at least 1`},
		{`SELECT jobs_subscribe(NULL, 'q', 'k')`, `jobs_subscribe: topic must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_subscribe('t', '', 'k')`, `jobs_subscribe: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_subscribe('t', 'q', repeat('k', 201))`, `jobs_subscribe: kind must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_unsubscribe(repeat('é', 101), 'queued', 'k')`, `jobs_unsubscribe: topic must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_unsubscribe('t', NULL, 'k')`, `jobs_unsubscribe: queue must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_unsubscribe('t', 'queued', NULL)`, `jobs_unsubscribe: kind must be a non-empty string of at most 200 bytes`},
		{`SELECT * FROM jobs_subscriptions('')`, `jobs_subscriptions: topic must be NULL or a non-empty string of at most 200 bytes`},
		{`SELECT jobs_publish(NULL)`, `jobs_publish: topic must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_publish(repeat('t', 201))`, `jobs_publish: topic must be a non-empty string of at most 200 bytes`},
		{`SELECT jobs_publish('t', payload => NULL)`, `jobs_publish: payload must not be NULL (use '{}' for no payload)`},
		{`SELECT jobs_publish('t', run_at => '-infinity')`, `jobs_publish: run_at must be a finite timestamp`},
		{`SELECT jobs_publish('t', priority => NULL)`, `jobs_publish: priority must not be NULL`},
		{`SELECT jobs_publish('t', max_attempts => 0)`, `jobs_publish: max_attempts must be at least 1`},
		{`SELECT jobs_publish('t', concurrency_key => '')`, `jobs_publish: concurrency_key must be NULL or a non-empty string of at most 200 bytes`},
		{`SELECT jobs_publish('t', meta => '"x"')`, `jobs_publish: meta must be NULL or a JSON object`},
		{`SELECT jobs_publish('t', notify => NULL)`, `jobs_publish: notify must not be NULL`},
		// An empty call still checks its other arrays.
		{`SELECT jobs_enqueue_many('{}', queues => ARRAY['q'])`, `jobs_enqueue_many: queues must be NULL or have as many elements as kinds (0)`},
		{`SELECT jobs_enqueue_many('{}', payloads => '{{"{}"}}'::jsonb[])`, `jobs_enqueue_many: payloads must be a one-dimensional array`},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			t.Parallel()
			fn, rest, _ := strings.Cut(tc.message, ": ")
			param, _, _ := strings.Cut(rest, " ")
			conn := f.Connect(t)
			_, err := call(t.Context(), conn, tc.sql)
			requireInvalid(t, err, fn, param)
			if pgErr := asPgError(err); pgErr != nil && pgErr.Message != tc.message {
				t.Errorf("message %q, want %q", pgErr.Message, tc.message)
			}
			f.unchanged(t, conn, tc.sql)
		})
	}
}

// TestRetryRefusalMessages pins the wording of what jobs_retry refuses (55000) and
// jobs_retry_many leaves alone (a WARNING): a job whose attempts are at the integer limit,
// and on a shard a job whose id names another shard.
func TestRetryRefusalMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := pgx.ParseConfig(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		warnings []string
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.Severity == "WARNING" {
			mu.Lock()
			defer mu.Unlock()
			warnings = append(warnings, n.Message+" HINT: "+n.Hint)
		}
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(t.Context())) })

	// Jobs 1 and 2 (ids of shards 1 and 2) cancelled before the database becomes shard 3;
	// job 1 also at the attempts limit.
	for _, sql := range []string{
		"SELECT jobs_enqueue('k')",
		"SELECT jobs_enqueue('k')",
		"SELECT jobs_cancel(1)",
		"SELECT jobs_cancel(2)",
		"UPDATE jobs SET attempts = 2147483647, max_attempts = 2147483647 WHERE id = 1",
		"SELECT jobs_set_shard(3)",
	} {
		mustCall(t, conn, sql)
	}
	for _, tc := range []struct{ sql, message, hint string }{
		{"SELECT jobs_retry(2)", "jobs_retry: job 2 cannot be queued again on shard 3: its id names shard 2",
			"A router would send its completion to another shard. Enqueue its payload again to run it here under a new id."},
		// The shard comes first: the job could not be retried here at any attempt count.
		{"SELECT jobs_retry(1)", "jobs_retry: job 1 cannot be queued again on shard 3: its id names shard 1",
			"A router would send its completion to another shard. Enqueue its payload again to run it here under a new id."},
	} {
		_, err := call(t.Context(), conn, tc.sql)
		pgErr := asPgError(err)
		if pgErr == nil || pgErr.Code != "55000" || pgErr.Message != tc.message || pgErr.Hint != tc.hint {
			t.Errorf("%s: %v, want SQLSTATE 55000 %q with the hint %q", tc.sql, err, tc.message, tc.hint)
		}
	}
	mustCall(t, conn, "SELECT jobs_retry_many(states => '{cancelled}')")
	mu.Lock()
	got := append([]string(nil), warnings...)
	mu.Unlock()
	want := []string{
		"jobs_retry_many: left 2 matching jobs alone (the lowest id 1): their ids name another shard than this one, 3" +
			" HINT: A router would send their completions to another shard. Enqueue their payloads again to run them here under new ids.",
		"jobs_retry_many: left 1 matching jobs alone (the lowest id 1): no attempt left, attempts is at its limit, 2147483647" +
			" HINT: Enqueue their payloads again to run them under new ids.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("jobs_retry_many warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The attempts message needs a job of this shard.
	id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
	mustCall(t, conn, "SELECT jobs_cancel($1)", id)
	mustCall(t, conn, "UPDATE jobs SET attempts = 2147483647 WHERE id = $1", id)
	_, err = call(t.Context(), conn, "SELECT jobs_retry($1)", id)
	wantMsg := "jobs_retry: job " + strconv.FormatInt(id, 10) + " has no attempt left: attempts is at its limit, 2147483647"
	if pgErr := asPgError(err); pgErr == nil || pgErr.Code != "55000" || pgErr.Message != wantMsg ||
		pgErr.Hint != "Enqueue its payload again to run it under a new id." {
		t.Errorf("jobs_retry of a job at the attempts limit: %v, want SQLSTATE 55000 %q", err, wantMsg)
	}
}
