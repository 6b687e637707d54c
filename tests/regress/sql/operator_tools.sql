-- Operator tools: the examples of docs/sql-api.md's jobs_list, jobs_inspect,
-- jobs_schedule_set_enabled and jobs_schedule_run sections, replayed in order as one psql
-- session in a fresh database, so job ids start at 1 as the doc shows. Where the doc shows
-- timestamps, this file prints booleans instead (a "doc:" comment quotes the doc's statement).
\set VERBOSITY terse

-- ex: list
SELECT count(*) FROM jobs_enqueue_many(ARRAY['email', 'email', 'resize', 'email', 'resize'],
                                       queues => ARRAY['mail', 'mail', 'images', 'mail', 'images'],
                                       max_attempts => ARRAY[1, 1, 1, 1, 1]);
SELECT id, attempt FROM jobs_claim('worker-1', 2, ARRAY['mail']);
SELECT jobs_fail(1, 1, 'SMTP 550 mailbox unavailable');
SELECT id, queue, kind, state, attempts, lease_holder, last_error FROM jobs_list();
SELECT id, state, last_error FROM jobs_list(state => 'dead');
SELECT id, kind FROM jobs_list(queue => 'mail', state => 'queued');
-- ex: list-pages
SELECT id FROM jobs_list(max_jobs => 2);
SELECT id FROM jobs_list(max_jobs => 2, before_id => 4);
SELECT id FROM jobs_list(max_jobs => 2, before_id => 2);
-- ex: list-error
SELECT * FROM jobs_list(max_jobs => 5000);

-- ex: inspect
-- doc: SELECT id, kind, payload, state, attempts, errors, lease_holder, finished_at FROM jobs_inspect(1);
SELECT id, kind, payload, state, attempts, (SELECT jsonb_agg(e - 'at') FROM jsonb_array_elements(errors) e) AS errors,
       lease_holder, finished_at IS NOT NULL AS finished
FROM jobs_inspect(1);
SELECT count(*) FROM jobs_inspect(999);

-- ex: set-enabled
SELECT jobs_schedule('nightly-report', '30 2 * * *', 'report', '{"format":"pdf"}') IS NOT NULL AS scheduled;
SELECT jobs_schedule_set_enabled('nightly-report', false);
SELECT jobs_schedule_set_enabled('nightly-report', false);
SELECT name, enabled FROM jobs_schedules;
SELECT jobs_schedule_set_enabled('nightly-report', true);
-- doc: SELECT name, enabled, next_run_at FROM jobs_schedules;
SELECT name, enabled, next_run_at = jobs_cron_next('30 2 * * *', now()) AS next_run_from_now FROM jobs_schedules;
-- ex: set-enabled-error
SELECT jobs_schedule_set_enabled('nightly', true);

-- ex: schedule-run
SELECT jobs_schedule_run('nightly-report');
-- doc: SELECT id, kind, payload, queue, state, run_at FROM jobs WHERE id = 6;
SELECT id, kind, payload, queue, state, run_at = created_at AS due_at_once FROM jobs WHERE id = 6;
SELECT name, last_run_at, last_job_id FROM jobs_schedules;
-- ex: schedule-run-error
SELECT jobs_schedule_run('nightly');
