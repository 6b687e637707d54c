-- The life of a job as a psql user sees it: enqueue, claim, complete; fail, retry with
-- backoff, dead; reading a dead job's errors history; jobs_retry; the batch forms.
-- Runs in a fresh database, so ids start at 1.
\set VERBOSITY terse

-- enqueue: a new job is queued, ready now, with the documented defaults
SELECT jobs_enqueue('email', '{"to": "ann@example.com"}') AS email \gset
SELECT :email = 1 AS first_id;
SELECT id, queue, kind, payload, state, priority, attempts, max_attempts, lease_holder,
       lease_expires_at IS NULL AS no_lease, last_error, errors, unique_key,
       finished_at IS NULL AS unfinished, run_at <= now() AS ready, created_at <= now() AS created
FROM jobs;

-- claim: the job is leased to the worker, attempt 1 is its fencing token
SELECT id, queue, kind, payload, attempt, max_attempts, priority,
       lease_expires_at = now() + interval '5 minutes' AS default_lease
FROM jobs_claim('worker-1');
SELECT state, attempts, lease_holder, lease_expires_at > now() AS leased FROM jobs WHERE id = :email;
-- nothing else is ready
SELECT count(*) AS claimed FROM jobs_claim('worker-2');

-- complete: only once, and only at the attempt that was claimed
SELECT jobs_complete(:email, 2) AS wrong_attempt;
SELECT jobs_complete(:email, 1) AS completed;
SELECT jobs_complete(:email, 1) AS completed_again;
SELECT state, attempts, lease_holder, lease_expires_at IS NULL AS no_lease,
       finished_at IS NOT NULL AS finished
FROM jobs WHERE id = :email;
SELECT jobs_complete(12345, 1) AS unknown_id;

-- fail: the default retry waits jobs_backoff(1), 0.75 to 1.25 s with the default settings
SELECT jobs_enqueue('report', max_attempts => 3) AS report \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1');
BEGIN;
SELECT jobs_fail(:report, 1, 'boom 1') AS state;
SELECT state, run_at - now() BETWEEN interval '750 ms' AND interval '1250 ms' AS backed_off,
       last_error, lease_expires_at IS NULL AS no_lease, finished_at IS NULL AS unfinished
FROM jobs WHERE id = :report;
-- not ready until the backoff has passed
SELECT count(*) AS claimed FROM jobs_claim('worker-2');
ROLLBACK;

-- fail with retry_at: ready again at once, and the next claim is attempt 2
SELECT jobs_fail(:report, 1, 'boom 1', retry_at => now()) AS state;
SELECT jobs_fail(:report, 1, 'boom 1 again', retry_at => now()) AS stale_fail;
SELECT attempt = 2 AS ok FROM jobs_claim('worker-2');
SELECT jobs_fail(:report, 2, 'boom 2', retry_at => now()) AS state;
SELECT attempt = 3 AS ok FROM jobs_claim('worker-1');

-- the last attempt fails: dead, finished, never claimed again
SELECT jobs_fail(:report, 3, 'boom 3') AS state;
SELECT state, attempts, max_attempts, last_error, lease_expires_at IS NULL AS no_lease,
       finished_at IS NOT NULL AS finished
FROM jobs WHERE id = :report;
SELECT count(*) AS claimed FROM jobs_claim('worker-1');
SELECT jobs_complete(:report, 3) AS complete_dead, jobs_fail(:report, 3, 'again') AS fail_dead,
       jobs_heartbeat(:report, 3) AS heartbeat_dead;

-- dead jobs, as an operator looks for them
SELECT id, kind, attempts, max_attempts, last_error FROM jobs WHERE state = 'dead' ORDER BY id;
-- the history has one entry per failed attempt: who failed, which attempt, what error
SELECT e.ord, e.entry->>'attempt' AS attempt, e.entry->>'worker' AS worker, e.entry->>'error' AS error,
       (e.entry->>'at')::timestamptz <= now() AS at_is_timestamp,
       ARRAY(SELECT jsonb_object_keys(e.entry) ORDER BY 1) AS keys
FROM jobs j, jsonb_array_elements(j.errors) WITH ORDINALITY AS e(entry, ord)
WHERE j.id = :report
ORDER BY e.ord;

-- jobs_retry: dead -> queued now, with one more attempt; history and counters are kept
SELECT jobs_retry(:report) AS retried;
SELECT jobs_retry(:report) AS retried_again;
SELECT state, attempts, max_attempts, last_error, jsonb_array_length(errors) AS errors,
       finished_at IS NULL AS unfinished, run_at <= now() AS ready
FROM jobs WHERE id = :report;
-- the next claim gets a fencing token never used before
SELECT attempt = 4 AS ok, max_attempts FROM jobs_claim('worker-3');
SELECT jobs_complete(:report, 3) AS old_token, jobs_complete(:report, 4) AS new_token;
SELECT jobs_retry(:report) AS retry_done, jobs_retry(12345) AS retry_unknown;

-- max_attempts 1: the first failure is final
SELECT jobs_enqueue('once', max_attempts => 1) AS once \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1');
SELECT jobs_fail(:once, 1, 'no retries', retry_at => now()) AS state;

-- errors are stored up to their first 10000 characters
SELECT jobs_enqueue('chatty', max_attempts => 1) AS chatty \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1');
SELECT jobs_fail(:chatty, 1, repeat('x', 20000)) AS state;
SELECT length(last_error) AS last_error_length, length(errors->0->>'error') AS history_length
FROM jobs WHERE id = :chatty;

-- enqueue_many returns ids in input order
SELECT array_agg(t.id ORDER BY t.ord) = ARRAY[:chatty + 1, :chatty + 2, :chatty + 3]::bigint[] AS input_order
FROM jobs_enqueue_many(ARRAY['a', 'b', 'c']) WITH ORDINALITY AS t(id, ord);
SELECT kind, queue, payload, priority, max_attempts, state FROM jobs WHERE id > :chatty ORDER BY id;
SELECT jobs_enqueue_many(ARRAY[]::text[]) AS none;

-- complete_many: completes the pairs still held; stale and duplicate pairs count once or not at all
SELECT array_agg(id - :chatty ORDER BY id) AS claimed, array_agg(attempt ORDER BY id) AS attempts
FROM jobs_claim('worker-1', 3);
SELECT id - :chatty AS completed
FROM jobs_complete_many(ARRAY[:chatty + 1, :chatty + 2, :chatty + 2, :chatty + 3, 12345]::bigint[],
                        ARRAY[1, 1, 1, 2, 1]) AS t(id)
ORDER BY id;
SELECT id - :chatty AS n, state FROM jobs WHERE id > :chatty ORDER BY id;

-- what the table looks like at the end
SELECT id, kind, state, attempts, max_attempts FROM jobs ORDER BY id;
