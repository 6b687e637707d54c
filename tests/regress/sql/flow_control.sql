-- Flow control: the examples of docs/sql-api.md's "Flow control" section (pause and
-- resume, concurrency limits, rate limits), replayed in order as one psql session in a fresh
-- database, so job ids start at 1 as the doc shows. Where the doc shows timestamps, this
-- file prints booleans instead (a "doc:" comment quotes the doc's statement). Concurrency is
-- covered by tests/isolation/specs/claim_pause.spec and claim_claim_limited.spec.
\set VERBOSITY terse

-- ex: pause
SELECT count(*) FROM jobs_enqueue_many(ARRAY['charge', 'charge', 'charge'], queues => ARRAY['payments', 'payments', 'payments']);
SELECT jobs_pause('payments');
SELECT jobs_pause('payments');
SELECT queue, paused, max_running, per_key, max_starts, per FROM jobs_queues;
SELECT id FROM jobs_claim('worker-1', 10, ARRAY['payments']);
SELECT id FROM jobs_claim('worker-1', 10);
LISTEN jobs_ready;
SELECT jobs_resume('payments');
UNLISTEN jobs_ready;
SELECT id, attempt FROM jobs_claim('worker-1', 10, ARRAY['payments']);
SELECT count(*) FROM jobs_queues;

-- ex: concurrency
SELECT jobs_set_concurrency('partner-api', max_running => 3, per_key => 1);
SELECT count(*)
FROM jobs_enqueue_many(array_fill('sync'::text, ARRAY[6]),
                       queues => array_fill('partner-api'::text, ARRAY[6]),
                       concurrency_keys => ARRAY['acme', 'acme', 'acme', 'globex', 'globex', 'initech']);
SELECT id, kind FROM jobs_claim('worker-1', 10, ARRAY['partner-api']);
SELECT j.id, j.concurrency_key FROM jobs j WHERE j.state = 'running' AND j.queue = 'partner-api' ORDER BY j.id;
SELECT id FROM jobs_claim('worker-2', 10, ARRAY['partner-api']);
SELECT jobs_complete(4, 1);
SELECT id FROM jobs_claim('worker-2', 10, ARRAY['partner-api']);
SELECT jobs_set_concurrency('partner-api', NULL);
SELECT count(*) FROM jobs_queues;

-- ex: concurrency-errors
SELECT jobs_set_concurrency('partner-api', 0);
SELECT jobs_set_concurrency('partner-api', 5, per_key => -1);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT jobs_set_concurrency('partner-api', 5);
SELECT id FROM jobs_claim('worker-1', 1, ARRAY['partner-api']);
ROLLBACK;

-- ex: rate
SELECT jobs_set_rate_limit('geocode', max_starts => 2, per => interval '1 minute');
SELECT count(*) FROM jobs_enqueue_many(array_fill('lookup'::text, ARRAY[3]), queues => array_fill('geocode'::text, ARRAY[3]));
SELECT id FROM jobs_claim('worker-1', 10, ARRAY['geocode']);
SELECT id FROM jobs_claim('worker-1', 10, ARRAY['geocode']);
-- doc: SELECT jobs_next_start('geocode');
SELECT jobs_next_start('geocode') = (SELECT min(started_at) FROM jobs WHERE queue = 'geocode') + interval '1 minute' AS one_minute_after_first_start;
SELECT jobs_next_start('payments') IS NULL AS no_rate_limit;
SELECT jobs_set_rate_limit('geocode', NULL, NULL);
SELECT id FROM jobs_claim('worker-1', 10, ARRAY['geocode']);

-- ex: rate-errors
SELECT jobs_set_rate_limit('geocode', 10, interval '0');
SELECT jobs_set_rate_limit('', 10, interval '1 second');

-- ex: limited
SELECT jobs_queue_limited('geocode') AS geocode, jobs_queue_limited('partner-api') AS partner_api;
SELECT jobs_set_rate_limit('geocode', 100, interval '1 second');
SELECT jobs_set_concurrency('partner-api', NULL, per_key => 2);
SELECT jobs_queue_limited('geocode') AS geocode, jobs_queue_limited('partner-api') AS partner_api;
SELECT jobs_pause('mail');
SELECT jobs_queue_limited('mail') AS paused_is_not_limited;
SELECT jobs_queue_limited('');

-- ex: fair
SELECT jobs_set_concurrency('reports', NULL, fair => true);
SELECT count(*)
FROM jobs_enqueue_many(array_fill('render'::text, ARRAY[7]),
                       queues => array_fill('reports'::text, ARRAY[7]),
                       concurrency_keys => ARRAY['big', 'big', 'big', 'big', 'small', 'small', NULL]);
SELECT c.id, j.concurrency_key FROM jobs_claim('worker-1', 1, ARRAY['reports']) c JOIN jobs j USING (id);
SELECT c.id, j.concurrency_key FROM jobs_claim('worker-1', 1, ARRAY['reports']) c JOIN jobs j USING (id);
SELECT c.id, j.concurrency_key FROM jobs_claim('worker-1', 1, ARRAY['reports']) c JOIN jobs j USING (id);
SELECT c.id, j.concurrency_key FROM jobs_claim('worker-1', 3, ARRAY['reports']) c JOIN jobs j USING (id) ORDER BY c.id;
SELECT queue, max_running, per_key, fair, ordered FROM jobs_queues WHERE queue = 'reports';

-- ex: ordered
SELECT jobs_set_concurrency('ledger', NULL, ordered => true);
SELECT count(*)
FROM jobs_enqueue_many(array_fill('post'::text, ARRAY[4]),
                       queues => array_fill('ledger'::text, ARRAY[4]),
                       priorities => ARRAY[9, 0, 0, 0],
                       concurrency_keys => ARRAY['acct-1', 'acct-1', 'acct-1', 'acct-2']);
SELECT c.id, j.concurrency_key FROM jobs_claim('worker-1', 10, ARRAY['ledger']) c JOIN jobs j USING (id) ORDER BY c.id;
SELECT jobs_fail(20, 1, 'bank timeout', now() + interval '1 hour');
SELECT jobs_complete(23, 1);
SELECT id FROM jobs_claim('worker-1', 10, ARRAY['ledger']);
BEGIN;
SELECT jobs_cancel(20);
SELECT jobs_retry(20);
COMMIT;
SELECT id, attempt FROM jobs_claim('worker-1', 10, ARRAY['ledger']);

-- ex: rate-per-key
SELECT jobs_set_rate_limit('webhooks', 2, interval '1 minute', per_key => true);
SELECT count(*)
FROM jobs_enqueue_many(array_fill('deliver'::text, ARRAY[4]),
                       queues => array_fill('webhooks'::text, ARRAY[4]),
                       concurrency_keys => ARRAY['shop-1', 'shop-1', 'shop-1', 'shop-2']);
SELECT c.id, j.concurrency_key FROM jobs_claim('worker-1', 10, ARRAY['webhooks']) c JOIN jobs j USING (id) ORDER BY c.id;
SELECT id FROM jobs_claim('worker-1', 10, ARRAY['webhooks']);
-- doc: SELECT jobs_next_start('webhooks');
SELECT jobs_next_start('webhooks') = (SELECT min(started_at) FROM jobs WHERE queue = 'webhooks') + interval '1 minute' AS one_minute_after_first_start;
SELECT jobs_set_rate_limit('webhooks', 1, interval '1 second', per_key => NULL);
