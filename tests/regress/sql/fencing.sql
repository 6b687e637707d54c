-- Fencing: the attempt number returned by jobs_claim is the only proof that a worker still
-- holds a job. After its lease expires and jobs_requeue_expired takes the job back, every
-- call the old holder makes with its attempt is refused, even once someone else runs it.
-- Leases here are 10 ms and the test sleeps 50 ms: every later transaction's now() is then
-- past the lease, whatever the machine's speed.
\set VERBOSITY terse

-- nothing is running: requeue_expired has nothing to do
SELECT jobs_requeue_expired() AS requeued;

-- a lease that is not expired is left alone
SELECT jobs_enqueue('steady') AS steady \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1', lease => '1 hour');
SELECT jobs_requeue_expired() AS requeued;
SELECT state, lease_holder FROM jobs WHERE id = :steady;

-- the lease expires while worker-1 is slow
SELECT jobs_enqueue('slow') AS slow \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1', queues => '{default}', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT jobs_requeue_expired() AS requeued;
SELECT state, attempts, lease_holder, lease_expires_at IS NULL AS no_lease, run_at <= now() AS ready,
       last_error LIKE 'lease expired at % (held by worker-1, attempt 1)' AS last_error_says_why,
       errors->0->>'attempt' AS errors_attempt, errors->0->>'worker' AS errors_worker,
       errors->0->>'error' = last_error AS errors_match
FROM jobs WHERE id = :slow;
SELECT state, lease_holder FROM jobs WHERE id = :steady;
SELECT jobs_requeue_expired() AS requeued_again;

-- the stale holder is refused everything while the job waits in the queue
SELECT jobs_complete(:slow, 1) AS complete, jobs_fail(:slow, 1, 'late') AS fail,
       jobs_heartbeat(:slow, 1) AS heartbeat, jobs_snooze(:slow, 1, now()) AS snooze;
SELECT count(*) AS completed FROM jobs_complete_many(ARRAY[:slow]::bigint[], ARRAY[1]);
SELECT count(*) AS extended FROM jobs_heartbeat_many(ARRAY[:slow]::bigint[], ARRAY[1]);
SELECT state, attempts, last_error LIKE 'lease expired%' AS unchanged FROM jobs WHERE id = :slow;

-- worker-2 takes it over with a new token; worker-1 is still refused
SELECT id = :slow AS same_job, attempt FROM jobs_claim('worker-2');
SELECT jobs_complete(:slow, 1) AS complete, jobs_fail(:slow, 1, 'late') AS fail,
       jobs_heartbeat(:slow, 1) AS heartbeat, jobs_snooze(:slow, 1, now()) AS snooze;
SELECT count(*) AS completed FROM jobs_complete_many(ARRAY[:slow]::bigint[], ARRAY[1]);
SELECT state, attempts, lease_holder FROM jobs WHERE id = :slow;
SELECT jobs_heartbeat(:slow, 2) AS heartbeat_holder;
SELECT jobs_complete(:slow, 2) AS complete_holder;
SELECT state, attempts, lease_holder, jsonb_array_length(errors) AS errors FROM jobs WHERE id = :slow;

-- an expired lease that nobody has taken back still lets its holder finish
SELECT jobs_enqueue('late') AS late \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1', queues => '{default}', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT lease_expires_at < now() AS expired FROM jobs WHERE id = :late;
SELECT jobs_complete(:late, 1) AS complete;
SELECT jobs_requeue_expired() AS requeued;

-- a heartbeat keeps an expiring lease alive
SELECT jobs_enqueue('beating') AS beating \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1', queues => '{default}', lease => '10 milliseconds');
BEGIN;
SELECT jobs_heartbeat(:beating, 1, lease => '1 hour') AS heartbeat;
SELECT lease_expires_at = now() + interval '1 hour' AS extended FROM jobs WHERE id = :beating;
COMMIT;
SELECT pg_sleep(0.05);
SELECT jobs_requeue_expired() AS requeued;
SELECT state, attempts FROM jobs WHERE id = :beating;

-- heartbeat_many extends only the pairs still held
SELECT array_agg(id ORDER BY id) = ARRAY[:steady, :beating]::bigint[] AS running
FROM jobs WHERE state = 'running';
SELECT id = :beating AS beating
FROM jobs_heartbeat_many(ARRAY[:beating, :beating, :steady, :slow]::bigint[], ARRAY[1, 1, 2, 2], '2 hours')
    AS t(id);
SELECT id = :beating AS beating, lease_expires_at - now() > interval '1 hour' AS two_hour_lease
FROM jobs WHERE state = 'running' ORDER BY id;

-- an expired lease on the last attempt is final: dead, finished
SELECT jobs_enqueue('doomed', max_attempts => 1) AS doomed \gset
SELECT attempt = 1 AS ok FROM jobs_claim('worker-1', queues => '{default}', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT jobs_requeue_expired() AS requeued;
SELECT state, attempts, finished_at IS NOT NULL AS finished, lease_expires_at IS NULL AS no_lease,
       last_error LIKE 'lease expired at % (held by worker-1, attempt 1)' AS last_error_says_why
FROM jobs WHERE id = :doomed;
SELECT jobs_complete(:doomed, 1) AS complete;
SELECT count(*) AS claimed FROM jobs_claim('worker-2');
