-- jobs_stats: one row per (queue, state) with jobs, ordered by queue then state, and for
-- queued rows the age of the oldest due job. jobs_prune: deletes finished jobs older than a
-- retention, lowest id first, a bounded number per call, dead ones only when asked, and
-- never a queued or running job.
\set VERBOSITY terse

-- an empty table has no stats rows
SELECT * FROM jobs_stats();

-- jobs in every state, in three queues
SELECT count(*) AS enqueued
FROM jobs_enqueue_many(ARRAY['done', 'dead', 'cancelled', 'running', 'queued'],
                       queues => ARRAY['a', 'a', 'a', 'a', 'a'],
                       max_attempts => ARRAY[5, 1, 5, 5, 5],
                       run_ats => ARRAY[now(), now(), now(), now(), now() + interval '1 hour']);
SELECT kind, CASE kind WHEN 'done' THEN jobs_complete(id, attempt)::text
                       WHEN 'dead' THEN jobs_fail(id, attempt, 'fatal')::text
                       WHEN 'cancelled' THEN jobs_cancel(id)::text
                       ELSE 'still running' END AS outcome
FROM jobs_claim('w', 10, queues => '{a}')
ORDER BY kind;
SELECT count(*) AS enqueued
FROM jobs_enqueue_many(ARRAY['b-future', 'b-old', 'b-older'], queues => ARRAY['b', 'b', 'b'],
                       run_ats => ARRAY[now() + interval '1 day', now() - interval '10 minutes',
                                        now() - interval '30 minutes']);
SELECT jobs_enqueue('c-future', queue => 'c', run_at => now() + interval '1 day') > 0 AS enqueued;
SELECT queue, kind, state FROM jobs ORDER BY queue, kind;

-- oldest_ready_age is set on queued rows with a due job only, and measures the oldest one:
-- queue a's only queued job is not due, b's oldest was due 30 minutes ago, c has none due
SELECT queue, state, jobs, oldest_ready_age IS NOT NULL AS has_age,
       oldest_ready_age >= interval '30 minutes' AND oldest_ready_age < interval '31 minutes' AS age_30m
FROM jobs_stats();

-- prune with the default retention (7 days) finds nothing this young
SELECT jobs_prune() AS pruned;

-- prune everything finished before now: done and cancelled go, dead stays, live jobs stay
SELECT jobs_prune(older_than => '0') AS pruned;
SELECT queue, kind, state FROM jobs ORDER BY queue, kind;
SELECT jobs_prune(older_than => '0', include_dead => true) AS pruned;
SELECT queue, kind, state FROM jobs ORDER BY queue, kind;
SELECT queue, state, jobs FROM jobs_stats();

-- max_jobs bounds one call, lowest id first (old ids are the old jobs; there is no index on
-- finished_at): p2, p3 and p1 finish in that order, in three transactions (a queue each, so
-- each claim takes the job meant), and p1 still goes first
SELECT count(*) AS enqueued FROM jobs_enqueue_many(ARRAY['p1', 'p2', 'p3'], queues => '{p1,p2,p3}');
SELECT jobs_complete(id, attempt) AS completed FROM jobs_claim('w', queues => '{p2}');
SELECT jobs_cancel(id) AS cancelled FROM jobs WHERE kind = 'p3';
SELECT jobs_complete(id, attempt) AS completed FROM jobs_claim('w', queues => '{p1}');
SELECT jobs_prune(older_than => '0', max_jobs => 1) AS pruned;
SELECT kind FROM jobs WHERE kind LIKE 'p_' ORDER BY kind;
SELECT jobs_prune(older_than => '0', max_jobs => 1) AS pruned;
SELECT kind FROM jobs WHERE kind LIKE 'p_' ORDER BY kind;
-- a call that returns less than max_jobs has caught up
SELECT jobs_prune(older_than => '0', max_jobs => 2) AS pruned;
SELECT jobs_prune(older_than => '0', max_jobs => 2) AS pruned;

-- a job finished in this very transaction is not older than 0: finished_at is now()
BEGIN;
SELECT jobs_enqueue('same-tx', queue => 'tx') > 0 AS enqueued;
SELECT jobs_complete(id, attempt) AS completed FROM jobs_claim('w', queues => '{tx}');
SELECT jobs_prune(older_than => '0') AS pruned;
COMMIT;
SELECT jobs_prune(older_than => '0') AS pruned;

-- what is left: the live jobs, untouched by every prune
SELECT queue, state, jobs FROM jobs_stats();
