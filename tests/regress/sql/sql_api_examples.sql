-- The examples of docs/sql-api.md, replayed in order as one psql session. Runs in a fresh
-- database, so job ids start at 1 and match the ids the doc shows.
--
-- Keep the two in step: when an example changes in the doc, change it here and re-accept.
-- Most statements are the doc's own. Where the doc shows output that differs between runs
-- (timestamps, intervals, jitter), this file prints booleans or stable columns instead;
-- each such place has a "doc:" comment quoting the statement the doc shows. A line
-- "-- ex: NAME" starts each block the doc shows, up to the next "-- ex:" or "-- ##" line.
\set VERBOSITY terse

-- ## Overview: NOTIFY channel jobs_ready (kept for the whole session)
-- ex: listen
LISTEN jobs_ready;

-- ## Overview: settings
-- ex: settings
SELECT * FROM jobs_settings;
UPDATE jobs_settings SET backoff_jitter = 0.5;

-- ## Overview: errors
-- ex: errors
SELECT * FROM jobs_claim(worker => 'worker-1', max_jobs => 0);
DO $$
DECLARE
    v_sqlstate text;
    v_column   text;
    v_message  text;
BEGIN
    PERFORM jobs_claim(worker => 'worker-1', max_jobs => 0);
EXCEPTION WHEN invalid_parameter_value THEN
    GET STACKED DIAGNOSTICS v_sqlstate = RETURNED_SQLSTATE,
                            v_column   = COLUMN_NAME,
                            v_message  = MESSAGE_TEXT;
    RAISE NOTICE 'sqlstate=% column=% message=%', v_sqlstate, v_column, v_message;
END;
$$;

-- ## jobs_enqueue
-- ex: enqueue
SELECT jobs_enqueue(kind => 'email', payload => '{"to":"a@example.com"}', queue => 'mail');
SELECT jobs_enqueue('cleanup');
SELECT jobs_enqueue(kind => 'email', payload => '{"to":"vip@example.com"}', queue => 'mail', priority => -10);
SELECT jobs_enqueue(kind => 'report', queue => 'reports', run_at => now() + interval '1 hour');
SELECT jobs_enqueue(kind => 'webhook', payload => '{"url":"https://example.com/hook"}', queue => 'hooks',
                    max_attempts => 2);
-- ex: enqueue-unique
SELECT jobs_enqueue(kind => 'sync', payload => '{"account":42}', unique_key => 'sync:42');
SELECT jobs_enqueue(kind => 'sync', payload => '{"account":42}', unique_key => 'sync:42');
-- ex: enqueue-rows
SELECT id, queue, kind, payload, state, priority, max_attempts, unique_key, run_at > now() AS later
FROM jobs ORDER BY id;
-- ex: enqueue-error
SELECT jobs_enqueue(kind => 'email', max_attempts => 0);

-- ## jobs_enqueue_many
-- ex: enqueue-many
SELECT * FROM jobs_enqueue_many(
    kinds    => ARRAY['resize', 'resize', 'resize'],
    payloads => ARRAY['{"image":1}', '{"image":2}', '{"image":3}']::jsonb[],
    queues   => ARRAY['images', 'images', 'images']);
-- ex: enqueue-many-unique
SELECT * FROM jobs_enqueue_many(
    ARRAY['sync', 'sync', 'sync'],
    payloads    => ARRAY['{"account":42}', '{"account":43}', '{"account":43}']::jsonb[],
    unique_keys => ARRAY['sync:42', 'sync:43', 'sync:43']);
-- ex: enqueue-many-error
SELECT * FROM jobs_enqueue_many(ARRAY['resize', NULL]);
SELECT * FROM jobs_enqueue_many(ARRAY['resize', 'resize'], queues => ARRAY['images']);

-- ## jobs_claim
-- ex: claim
-- doc: SELECT * FROM jobs_claim('worker-1');
SELECT id, queue, kind, payload, attempt, max_attempts, priority, run_at <= now() AS due,
       lease_expires_at = now() + interval '5 minutes' AS five_minute_lease, created_at <= now() AS created
FROM jobs_claim('worker-1');
-- ex: claim-named
SELECT id, kind, payload, attempt
FROM jobs_claim(worker => 'worker-1', max_jobs => 2, queues => ARRAY['images'], lease => interval '30 seconds');
-- ex: claim-none
SELECT * FROM jobs_claim('worker-2', queues => ARRAY['reports']);
SELECT id, state, attempts, lease_holder FROM jobs WHERE state = 'running' ORDER BY id;
-- ex: claim-error
SELECT * FROM jobs_claim('worker-1', queues => ARRAY[]::text[]);

-- ## jobs_complete
-- ex: complete
SELECT jobs_complete(id => 3, attempt => 1);
SELECT jobs_complete(3, 1);
SELECT state, lease_holder, lease_expires_at, finished_at IS NOT NULL AS finished FROM jobs WHERE id = 3;
-- ex: complete-error
SELECT jobs_complete(3, NULL);

-- ## jobs_complete_many
-- ex: complete-many
SELECT * FROM jobs_complete_many(ARRAY[8, 9, 3], ARRAY[1, 1, 1]) ORDER BY 1;
-- ex: complete-many-error
SELECT * FROM jobs_complete_many(ARRAY[8, 9], ARRAY[1]);

-- ## jobs_complete_and_claim
-- ex: complete-and-claim
BEGIN;
SELECT id, attempt FROM jobs_claim('worker-1', queues => ARRAY['mail']);
SELECT completed, id, queue, attempt
FROM jobs_complete_and_claim('worker-1', ARRAY[1, 8], ARRAY[1, 1], 2, ARRAY['images', 'mail']);
SELECT completed, id, queue, attempt
FROM jobs_complete_and_claim('worker-1', ARRAY[10], ARRAY[1], max_jobs => 0);
ROLLBACK;
-- ex: complete-and-claim-error
SELECT * FROM jobs_complete_and_claim('worker-1', ARRAY[10], ARRAY[1], max_jobs => -1);

-- ## jobs_fail
-- ex: fail
SELECT id, attempt FROM jobs_claim('worker-1', queues => ARRAY['hooks']);
SELECT jobs_fail(5, 1, 'HTTP 503 Service Unavailable', retry_at => now());
SELECT jobs_fail(5, 1, 'a late report from attempt 1') IS NULL AS not_held;
SELECT id, attempt FROM jobs_claim('worker-2', queues => ARRAY['hooks']);
SELECT jobs_fail(id => 5, attempt => 2, error => 'HTTP 503 Service Unavailable');
-- ex: fail-dead
SELECT state, attempts, max_attempts, last_error, finished_at IS NOT NULL AS finished FROM jobs WHERE id = 5;
SELECT e->>'attempt' AS attempt, e->>'worker' AS worker, e->>'error' AS error
FROM jobs, jsonb_array_elements(errors) AS e
WHERE id = 5;
-- ex: fail-backoff
SELECT id, attempt FROM jobs_claim('worker-1', queues => ARRAY['mail']);
BEGIN;
SELECT jobs_fail(1, 1, 'SMTP 421: try again later');
-- doc: SELECT run_at - now() AS retry_in FROM jobs WHERE id = 1;
SELECT run_at - now() BETWEEN interval '0.75 seconds' AND interval '1.25 seconds' AS retry_in_1s_25pct
FROM jobs WHERE id = 1;
COMMIT;
-- ex: fail-error
SELECT jobs_fail(1, 1, NULL);

-- ## jobs_backoff
-- ex: backoff
SELECT jobs_backoff(5) BETWEEN interval '12 seconds' AND interval '20 seconds' AS within_jitter;
-- ex: backoff-settings
UPDATE jobs_settings SET backoff_jitter = 0;
SELECT attempt, jobs_backoff(attempt) FROM unnest(ARRAY[1, 2, 3, 5, 10, 12, 13, 100]) AS attempt;
UPDATE jobs_settings SET backoff_base = '10 seconds', backoff_cap = '10 minutes';
SELECT attempt, jobs_backoff(attempt) FROM generate_series(1, 8) AS attempt;
UPDATE jobs_settings SET backoff_base = DEFAULT, backoff_cap = DEFAULT, backoff_jitter = DEFAULT;
SELECT * FROM jobs_settings;
-- ex: backoff-error
SELECT jobs_backoff(0);

-- ## jobs_heartbeat
-- ex: heartbeat
SELECT id, attempt FROM jobs_claim('worker-1', queues => ARRAY['default'], lease => interval '1 minute');
SELECT jobs_heartbeat(2, 1);
SELECT jobs_heartbeat(id => 2, attempt => 1, lease => interval '10 minutes');
SELECT jobs_heartbeat(2, 7);
-- ex: heartbeat-error
SELECT jobs_heartbeat(2, 1, interval '0');

-- ## jobs_heartbeat_many
-- ex: heartbeat-many
SELECT id, attempt FROM jobs_claim('worker-1', max_jobs => 2, queues => ARRAY['default']);
SELECT * FROM jobs_heartbeat_many(ARRAY[2, 6, 12, 3], ARRAY[1, 1, 1, 1]) ORDER BY 1;
SELECT * FROM jobs_heartbeat_many(ids => ARRAY[2, 6], attempts => ARRAY[1, 1], lease => interval '2 minutes') ORDER BY 1;
-- ex: heartbeat-many-error
SELECT * FROM jobs_heartbeat_many(ARRAY[2, NULL], ARRAY[1, 1]);

-- ## jobs_snooze
-- ex: snooze
SELECT jobs_snooze(6, 1, now() + interval '10 minutes');
SELECT state, attempts, max_attempts, run_at > now() AS later, lease_expires_at FROM jobs WHERE id = 6;
SELECT jobs_snooze(id => 6, attempt => 1, run_at => now());
-- ex: snooze-error
SELECT jobs_snooze(6, 1, NULL);

-- ## jobs_requeue_expired
-- ex: requeue-expired
SELECT id, attempt FROM jobs_claim('worker-3', queues => ARRAY['images'], lease => interval '10 milliseconds');
SELECT pg_sleep(0.1);
SELECT jobs_requeue_expired();
-- doc: SELECT state, attempts, lease_holder, last_error FROM jobs WHERE id = 10;
SELECT state, attempts, lease_holder,
       last_error LIKE 'lease expired at % (held by worker-3, attempt 1)' AS last_error_says_expired
FROM jobs WHERE id = 10;
-- ex: requeue-expired-fencing
SELECT jobs_complete(10, 1);
SELECT id, attempt FROM jobs_claim('worker-1', queues => ARRAY['images']);
SELECT jobs_complete(10, 1);
SELECT jobs_complete(10, 2);
SELECT jobs_requeue_expired();

-- ## jobs_cancel
-- ex: cancel
SELECT jobs_cancel(1);
SELECT jobs_cancel(12);
SELECT jobs_heartbeat(12, 1) AS heartbeat, jobs_complete(12, 1) AS complete, jobs_fail(12, 1, 'too late') AS fail;
SELECT jobs_cancel(id => 12);
SELECT id, state, finished_at IS NOT NULL AS finished FROM jobs WHERE id IN (1, 12) ORDER BY id;
-- ex: cancel-worker
SELECT jobs_cancel(2, 1, 'nothing to clean up: the directory is gone');
SELECT state, attempts, last_error, jsonb_array_length(errors) AS errors FROM jobs WHERE id = 2;
SELECT jobs_cancel(id => 2, attempt => 1, error => 'nothing to clean up: the directory is gone');
-- ex: cancel-error
SELECT jobs_cancel(NULL);
SELECT jobs_cancel(2, 1, NULL);

-- ## jobs_retry
-- ex: retry
SELECT jobs_retry(5);
SELECT state, attempts, max_attempts, last_error, finished_at FROM jobs WHERE id = 5;
SELECT jobs_retry(id => 1);
SELECT jobs_retry(3);
-- ex: retry-unique
SELECT jobs_enqueue(kind => 'sync', payload => '{"account":43}', unique_key => 'sync:43');
SELECT jobs_retry(12);

-- ## jobs_stats
-- ex: stats
-- doc: SELECT * FROM jobs_stats();
SELECT queue, state, jobs, oldest_ready_age > interval '0' AS has_due_job FROM jobs_stats();
-- ex: stats-alert
SELECT queue, jobs AS depth, oldest_ready_age > interval '5 minutes' AS backlog_alert
FROM jobs_stats() WHERE state = 'queued';

-- ## jobs_get
-- ex: get
-- doc: SELECT * FROM jobs_get(5);
SELECT state, attempts, max_attempts, run_at <= now() AS due, last_error, created_at <= now() AS created,
       finished_at
FROM jobs_get(5);
SELECT * FROM jobs_get(999);
-- ex: get-error
SELECT * FROM jobs_get(NULL);

-- ## jobs_prune
-- ex: prune
SELECT jobs_prune();
SELECT jobs_prune(older_than => interval '0', max_jobs => 2);
SELECT jobs_prune(older_than => interval '0', include_dead => true);
SELECT state, count(*) FROM jobs GROUP BY state ORDER BY state;
-- ex: prune-error
SELECT jobs_prune(max_jobs => 0);

-- ## jobs_cancel_many
-- ex: cancel-many
SELECT count(*) FROM jobs_enqueue_many(array_fill('cleanup'::text, ARRAY[2500]),
                                       queues => array_fill('bulk'::text, ARRAY[2500]));
SELECT jobs_cancel_many(queue => 'bulk', max_jobs => 1000);
-- ex: cancel-many-drain
DO $$
DECLARE
    v_cancelled integer;
BEGIN
    LOOP
        v_cancelled := jobs_cancel_many(queue => 'bulk', max_jobs => 1000);
        RAISE NOTICE 'cancelled %', v_cancelled;
        EXIT WHEN v_cancelled = 0;
        COMMIT; -- each batch in a transaction of its own
    END LOOP;
END;
$$;
-- ex: cancel-many-running
SELECT id, attempt FROM jobs_claim('worker-1', queues => ARRAY['mail']);
SELECT jobs_cancel_many(queue => 'mail', states => '{queued, running}');
SELECT jobs_complete(1, 2);
-- ex: cancel-many-error
SELECT jobs_cancel_many(states => '{done}');

-- ## jobs_retry_many
-- ex: retry-many
SELECT jobs_retry_many();
SELECT jobs_retry_many(queue => 'bulk', states => '{cancelled}', max_jobs => 2000);
SELECT jobs_retry_many(ids => ARRAY[1, 2, 3], states => '{dead, cancelled}');
SELECT queue, state, count(*) FROM jobs GROUP BY queue, state ORDER BY queue, state;
-- ex: retry-many-error
SELECT jobs_retry_many(states => '{queued}');

-- ## jobs_delete_many
-- ex: delete-many
SELECT jobs_cancel_many(queue => 'bulk');
SELECT jobs_delete_many(queue => 'bulk', kind => 'cleanup', max_jobs => 2000);
SELECT jobs_delete_many(ids => ARRAY[1, 4]);
SELECT queue, state, count(*) FROM jobs GROUP BY queue, state ORDER BY queue, state;
-- ex: delete-many-error
SELECT jobs_delete_many(states => '{queued}');

-- ## jobs_maintain
-- ex: maintain
SELECT * FROM jobs_maintain();
SELECT done_retention, cancelled_retention, dead_retention FROM jobs_settings;
UPDATE jobs_settings SET cancelled_retention = interval '0';
SELECT * FROM jobs_maintain();
UPDATE jobs_settings SET cancelled_retention = DEFAULT;
-- ex: maintain-error
SELECT jobs_maintain(max_jobs => 0);

-- ## jobs_metrics
-- ex: metrics
-- doc: SELECT * FROM jobs_metrics();
-- (Rows of queues with no unfinished job are left out: whether autovacuum has analyzed the
-- table by now decides whether they have an estimate of done jobs.)
SELECT queue, ready, scheduled, running, running_expired, dead, cancelled, jobs_created_total
FROM jobs_metrics()
WHERE queue IS NULL OR ready + scheduled + running + dead + cancelled > 0;
-- ## jobs_cron_next
-- ex: cron-next
SELECT jobs_cron_next('*/15 * * * *', '2026-03-02 10:07:00+00');
SELECT jobs_cron_next('0 9 * * MON-FRI', '2026-03-06 15:00:00+00', 'America/New_York');
SELECT jobs_cron_next('0 0 13 * FRI', '2026-03-01 00:00:00+00');
SELECT jobs_cron_next('@every 30 seconds', '2026-03-02 10:07:10+00');
-- ex: cron-next-dst
SELECT jobs_cron_next('30 2 * * *', '2026-03-28 12:00:00+00', 'Europe/Berlin');
SELECT jobs_cron_next('30 2 * * *', '2026-10-24 12:00:00+00', 'Europe/Berlin');
SELECT jobs_cron_next('30 2 * * *', '2026-10-25 00:30:00+00', 'Europe/Berlin');
-- ex: cron-next-error
SELECT jobs_cron_next('0 24 * * *', now());
SELECT jobs_cron_next('@daily', now(), 'Mars/Olympus_Mons');

-- ## jobs_schedule
-- ex: schedule
-- doc: SELECT jobs_schedule('nightly-report', '30 2 * * *', 'report', '{"format":"pdf"}', timezone => 'Europe/Berlin');
SELECT jobs_schedule('nightly-report', '30 2 * * *', 'report', '{"format":"pdf"}', timezone => 'Europe/Berlin')
       = jobs_cron_next('30 2 * * *', now(), 'Europe/Berlin') AS next_run_is_the_next_0230_in_berlin;
SELECT name, cron, timezone, kind, payload, queue, enabled, last_run_at, last_job_id FROM jobs_schedules;
-- ex: schedule-again
SELECT jobs_schedule('nightly-report', '30 2 * * *', 'report', '{"format":"pdf"}', timezone => 'Europe/Berlin')
       = (SELECT next_run_at FROM jobs_schedules WHERE name = 'nightly-report') AS next_run_kept;
-- ex: schedule-error
SELECT jobs_schedule('bad', '0 0 31 2 *', 'report');
SELECT jobs_schedule('bad', '0 0 * * MON', 'report', timezone => 'Berlin');

-- ## jobs_schedule_tick
-- ex: tick
SELECT jobs_schedule('heartbeat', '@every 1 second', 'ping', queue => 'ops') IS NOT NULL AS scheduled;
SELECT pg_sleep(1.1);
SELECT jobs_schedule_tick();
-- doc: SELECT kind, queue, state, run_at FROM jobs WHERE kind = 'ping';
SELECT kind, queue, state, run_at = date_trunc('second', run_at) AS on_a_whole_second FROM jobs WHERE kind = 'ping';
-- doc: SELECT name, next_run_at, last_run_at, last_job_id FROM jobs_schedules WHERE name = 'heartbeat';
SELECT name, next_run_at = last_run_at + interval '1 second' AS next_is_one_second_later,
       last_job_id = (SELECT id FROM jobs WHERE kind = 'ping') AS last_job_is_the_ping
FROM jobs_schedules WHERE name = 'heartbeat';

-- ## jobs_unschedule
-- ex: unschedule
SELECT jobs_unschedule('heartbeat');
SELECT jobs_unschedule('heartbeat');

-- ## Dependencies and workflows
-- ex: deps-enqueue
LISTEN jobs_finished;
SELECT jobs_enqueue('fetch', '{"url":"https://example.com/a.csv"}', queue => 'etl');
SELECT jobs_enqueue('fetch', '{"url":"https://example.com/b.csv"}', queue => 'etl');
SELECT jobs_enqueue('merge', queue => 'etl', depends_on => ARRAY[2516, 2517], notify_finished => true);
SELECT jobs_enqueue('cleanup', queue => 'etl', depends_on => ARRAY[2518], on_parent_failure => 'run');
SELECT id, kind, state, depends_on, pending_parents, on_parent_failure FROM jobs WHERE queue = 'etl' ORDER BY id;
-- ex: deps-run
SELECT id, kind, attempt, parent_results FROM jobs_claim('worker-1', 10, ARRAY['etl']);
SELECT jobs_complete(2516, 1, result => '{"rows": 120}');
SELECT id, state, pending_parents FROM jobs WHERE id = 2518;
SELECT jobs_complete(2517, 1, result => '{"rows": 80}');
SELECT id, kind, attempt, parent_results FROM jobs_claim('worker-1', 10, ARRAY['etl']);
-- ex: deps-cascade
SELECT jobs_enqueue('render', queue => 'site', max_attempts => 1);
SELECT jobs_enqueue('publish', queue => 'site', depends_on => ARRAY[2520]);
SELECT jobs_enqueue('announce', queue => 'site', depends_on => ARRAY[2521]);
SELECT jobs_fail(2520, 1, 'template missing') FROM jobs_claim('worker-1', 1, ARRAY['site']);
SELECT id, kind, state, cancelled_by, last_error FROM jobs WHERE queue = 'site' ORDER BY id;
-- ex: deps-retry
SELECT jobs_retry(2520);
SELECT id, kind, state, pending_parents, cancelled_by FROM jobs WHERE queue = 'site' ORDER BY id;

-- ## jobs_enqueue_workflow
-- ex: workflow
SELECT * FROM jobs_enqueue_workflow('[
  {"name": "extract",   "kind": "extract",   "queue": "wf", "payload": {"day": "2026-12-03"}},
  {"name": "transform", "kind": "transform", "queue": "wf", "depends_on": ["extract"]},
  {"name": "load",      "kind": "load",      "queue": "wf", "depends_on": ["transform"], "notify_finished": true}
]');
SELECT id, workflow_id, workflow_step, state, depends_on FROM jobs WHERE workflow_id = 2523 ORDER BY id;
SELECT jobs_complete(id, attempt, '{"rows": 3}') FROM jobs_claim('worker-1', 1, ARRAY['wf']);
SELECT id, kind, attempt, parent_results FROM jobs_claim('worker-1', 1, ARRAY['wf']);
-- ex: workflow-error
SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "depends_on": ["b"]},
                                      {"name": "b", "kind": "k", "depends_on": ["a"]}]');

-- ## jobs_cancel_workflow
-- ex: cancel-workflow
SELECT jobs_cancel_workflow(2523);
SELECT jobs_complete(2524, 1);
SELECT workflow_step, state, last_error FROM jobs WHERE workflow_id = 2523 ORDER BY id;

-- ## jobs_checkpoint
-- ex: checkpoint
SELECT jobs_checkpoint(2518, 1, 'download', '{"file": "/tmp/merged.csv"}');
SELECT jobs_fail(2518, 1, 'disk full', retry_at => now());
SELECT id, attempt, checkpoints FROM jobs_claim('worker-1', 1, ARRAY['etl']);
SELECT jobs_checkpoint(2518, 1, 'upload', 'null');

-- ## jobs_progress
-- ex: progress
SELECT jobs_progress(2518, 2, '{"done": 1, "of": 2}');
SELECT state, attempts, progress FROM jobs_get(2518);
SELECT jobs_progress(2518, 1, '{"done": 2, "of": 2}');

-- ## jobs_result
-- ex: result
SELECT * FROM jobs_result(2518);
SELECT jobs_complete(2518, 2, '{"rows": 200}');
SELECT * FROM jobs_result(2518);
SELECT * FROM jobs_result(2519);
SELECT * FROM jobs_result(999999);

-- ## jobs_subscribe
-- ex: subscribe
SELECT jobs_subscribe('order_placed', 'mail', 'send_receipt');
SELECT jobs_subscribe('order_placed', 'billing', 'charge_card');
SELECT jobs_subscribe('order_placed', 'mail', 'send_receipt');
-- ex: subscribe-error
SELECT jobs_subscribe('order_placed', 'mail', '');

-- ## jobs_subscriptions
-- ex: subscriptions
-- doc: SELECT * FROM jobs_subscriptions('order_placed');
SELECT topic, queue, kind, created_at <= now() AS created FROM jobs_subscriptions('order_placed');

-- ## jobs_publish
-- ex: publish
SELECT jobs_publish('order_placed', '{"order": 42}');
SELECT id, queue, kind, payload FROM jobs WHERE payload = '{"order": 42}' ORDER BY id;
SELECT jobs_publish('nobody_listens', '{"order": 42}');
-- ex: publish-transaction
BEGIN;
SELECT jobs_publish('order_placed', '{"order": 43}', priority => 5);
ROLLBACK;
SELECT count(*) FROM jobs WHERE payload = '{"order": 43}';
-- ex: publish-error
SELECT jobs_publish('order_placed', max_attempts => 0);

-- ## jobs_unsubscribe
-- ex: unsubscribe
SELECT jobs_unsubscribe('order_placed', 'billing', 'charge_card');
SELECT jobs_unsubscribe('order_placed', 'billing', 'charge_card');
SELECT jobs_publish('order_placed', '{"order": 44}');
