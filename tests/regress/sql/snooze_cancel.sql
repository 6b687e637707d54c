-- jobs_snooze puts a held job back until later without spending an attempt: attempts keeps
-- counting (it is the fencing token) and max_attempts grows by one instead. jobs_cancel
-- stops a queued or running job for good (until jobs_retry), fencing out its holder.
\set VERBOSITY terse

-- snooze into the future: queued, not claimable, budget raised by one
SELECT jobs_enqueue('nap', max_attempts => 2) AS nap \gset
SELECT attempt = 1 AS ok FROM jobs_claim('w1');
SELECT jobs_snooze(:nap, 2, now()) AS wrong_attempt;
BEGIN;
SELECT jobs_snooze(:nap, 1, now() + interval '1 hour') AS snoozed;
SELECT state, attempts, max_attempts, run_at = now() + interval '1 hour' AS run_at_as_asked,
       lease_expires_at IS NULL AS no_lease, lease_holder, last_error, errors, finished_at
FROM jobs WHERE id = :nap;
COMMIT;
SELECT count(*) AS claimed FROM jobs_claim('w1');
-- the snoozing worker no longer holds it
SELECT jobs_snooze(:nap, 1, now()) AS snooze_again, jobs_complete(:nap, 1) AS complete,
       jobs_heartbeat(:nap, 1) AS heartbeat, jobs_fail(:nap, 1, 'x') AS fail;

-- snoozed jobs keep their full budget: a job with max_attempts 2 snoozed three times
-- still gets two real attempts
SELECT jobs_enqueue('napper', queue => 'naps', max_attempts => 2) AS napper \gset
SELECT jobs_snooze(id, attempt, now()) AS snoozed FROM jobs_claim('w1', queues => '{naps}');
SELECT jobs_snooze(id, attempt, now()) AS snoozed FROM jobs_claim('w1', queues => '{naps}');
SELECT jobs_snooze(id, attempt, now()) AS snoozed FROM jobs_claim('w1', queues => '{naps}');
SELECT attempts, max_attempts FROM jobs WHERE id = :napper;
SELECT jobs_fail(id, attempt, 'real failure 1', now()) AS state FROM jobs_claim('w1', queues => '{naps}');
SELECT jobs_fail(id, attempt, 'real failure 2', now()) AS state FROM jobs_claim('w1', queues => '{naps}');
SELECT attempts, max_attempts, state FROM jobs WHERE id = :napper;

-- a snoozed job is ready at its new run_at and ordered by it: second, snoozed into the
-- past, now comes before first, snoozed until now
SELECT count(*) AS enqueued FROM jobs_enqueue_many(ARRAY['first', 'second'], queues => '{past,past}');
SELECT kind, jobs_snooze(id, attempt, CASE kind WHEN 'first' THEN now() ELSE now() - interval '1 day' END) AS snoozed
FROM jobs_claim('w1', 2, queues => '{past}');
SELECT kind, attempt FROM jobs_claim('w1', 10, queues => '{past}');

-- cancel a queued job: cancelled, finished, never claimed
SELECT jobs_enqueue('unwanted', queue => 'c') AS unwanted \gset
SELECT jobs_cancel(:unwanted) AS cancelled;
SELECT state, attempts, finished_at IS NOT NULL AS finished, lease_expires_at IS NULL AS no_lease
FROM jobs WHERE id = :unwanted;
SELECT count(*) AS claimed FROM jobs_claim('w1', queues => '{c}');
SELECT jobs_cancel(:unwanted) AS cancelled_again;

-- cancel a running job: its holder is fenced out
SELECT jobs_enqueue('runaway', queue => 'c') AS runaway \gset
SELECT attempt = 1 AS ok FROM jobs_claim('w1', queues => '{c}', lease => '10 milliseconds');
SELECT jobs_cancel(:runaway) AS cancelled;
SELECT state, attempts, lease_holder, lease_expires_at IS NULL AS no_lease, finished_at IS NOT NULL AS finished
FROM jobs WHERE id = :runaway;
SELECT jobs_complete(:runaway, 1) AS complete, jobs_fail(:runaway, 1, 'x') AS fail,
       jobs_heartbeat(:runaway, 1) AS heartbeat, jobs_snooze(:runaway, 1, now()) AS snooze;
SELECT count(*) AS completed FROM jobs_complete_many(ARRAY[:runaway]::bigint[], ARRAY[1]);
SELECT count(*) AS extended FROM jobs_heartbeat_many(ARRAY[:runaway]::bigint[], ARRAY[1]);
-- once its lease would have expired, requeue_expired still leaves it alone: it holds no lease
SELECT pg_sleep(0.05);
SELECT jobs_requeue_expired() AS requeued;
SELECT state FROM jobs WHERE id = :runaway;

-- finished jobs cannot be cancelled; unknown ids are not an error
SELECT jobs_enqueue('finished', queue => 'c') AS finished \gset
SELECT jobs_complete(id, attempt) AS completed FROM jobs_claim('w1', queues => '{c}');
SELECT jobs_cancel(:finished) AS cancel_done;
SELECT jobs_cancel(:napper) AS cancel_dead;
SELECT jobs_cancel(12345) AS cancel_unknown;
SELECT state FROM jobs WHERE id IN (:finished, :napper) ORDER BY id;

-- a cancelled job can be retried: queued now, attempts kept, at least one more attempt
SELECT jobs_retry(:runaway) AS retried;
SELECT state, attempts, max_attempts, finished_at IS NULL AS unfinished FROM jobs WHERE id = :runaway;
SELECT kind, attempt FROM jobs_claim('w2', queues => '{c}');
SELECT jobs_complete(:runaway, 1) AS old_token, jobs_complete(:runaway, 2) AS new_token;

-- cancel frees the job's unique_key
SELECT jobs_enqueue('keyed', queue => 'c', unique_key => 'k') AS keyed \gset
SELECT jobs_cancel(:keyed) AS cancelled;
SELECT jobs_enqueue('keyed', queue => 'c', unique_key => 'k') > :keyed AS new_job;
