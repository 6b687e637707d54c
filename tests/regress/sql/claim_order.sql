-- Which jobs jobs_claim takes and in what order: only queued jobs that are due, from the
-- queues asked for (NULL: all), best first by (priority, run_at, id), at most max_jobs, and
-- returned in that order. Jobs are named by kind so the output reads as the order.
\set VERBOSITY terse

-- nothing to claim in an empty table, from any queue
SELECT count(*) AS claimed FROM jobs_claim('w');
SELECT count(*) AS claimed FROM jobs_claim('w', queues => '{default}');
SELECT count(*) AS claimed FROM jobs_claim('w', queues => '{a,b}');

-- one queue: lower priority first, then earlier run_at, then lower id
SELECT count(*) AS enqueued
FROM jobs_enqueue_many(
    ARRAY['p5-old', 'p0-new-id3', 'p0-new-id4', 'p0-old', 'neg-priority', 'p5-new', 'future'],
    priorities => ARRAY[5, 0, 0, 0, -1, 5, -100],
    run_ats => ARRAY[now() - interval '2 minutes', now() - interval '1 minute', now() - interval '1 minute',
                     now() - interval '2 minutes', now(), now() - interval '1 minute', now() + interval '1 hour']);
-- max_jobs limits the claim, and the rows come back best first
SELECT kind, priority, attempt FROM jobs_claim('w', 3, queues => '{default}');
SELECT kind, priority, attempt FROM jobs_claim('w', 10, queues => '{default}');
-- a job that is not due is not claimed, whatever its priority
SELECT state, run_at > now() AS future FROM jobs WHERE kind = 'future';
SELECT count(*) AS claimed FROM jobs_claim('w', queues => '{default}');

-- several queues: only those named, merged by the same order across queues
SELECT count(*) AS enqueued
FROM jobs_enqueue_many(ARRAY['a1', 'a2', 'b1', 'b2', 'c1', 'c2'],
                       queues => ARRAY['a', 'a', 'b', 'b', 'c', 'c'],
                       priorities => ARRAY[1, 3, 2, 4, 0, 0]);
SELECT queue, kind, priority FROM jobs_claim('w', 3, queues => '{a,b,nosuchqueue}');
SELECT queue, kind, priority FROM jobs_claim('w', 10, queues => '{b,a}');
SELECT queue, kind, state FROM jobs WHERE queue IN ('a', 'b', 'c') ORDER BY kind;

-- a one-element list takes the single-queue path: same rules
SELECT queue, kind FROM jobs_claim('w', 10, queues => '{c}');

-- NULL: all queues, still best first overall
SELECT count(*) AS enqueued
FROM jobs_enqueue_many(ARRAY['x-p2', 'y-p1', 'z-p0', 'y-p3', 'x-p1-later'],
                       queues => ARRAY['x', 'y', 'z', 'y', 'x'],
                       priorities => ARRAY[2, 1, 0, 3, 1],
                       run_ats => ARRAY[now(), now() - interval '1 minute', now(), now(), now()]);
SELECT queue, kind, priority FROM jobs_claim('w', 2);
SELECT queue, kind, priority FROM jobs_claim('w', 1, queues => NULL);
SELECT queue, kind, priority FROM jobs_claim('w', 100);
SELECT count(*) AS claimed FROM jobs_claim('w', 100);

-- ties: equal priority and run_at fall back to id, i.e. enqueue order
SELECT count(*) AS enqueued
FROM jobs_enqueue_many((SELECT array_agg('tie-' || i ORDER BY i) FROM generate_series(1, 5) AS i),
                       queues => array_fill('ties'::text, ARRAY[5]));
SELECT kind FROM jobs_claim('w', 2, queues => '{ties}');

-- a failed job comes back at its retry_at and is ordered by it: retried now, tie-1 goes
-- behind the jobs that were due before it; retried in the past, tie-2 goes ahead of them
SELECT jobs_fail(id, attempts, 'again', retry_at => now()) AS state FROM jobs WHERE kind = 'tie-1';
SELECT kind, attempt FROM jobs_claim('w', 2, queues => '{ties}');
SELECT jobs_fail(id, attempts, 'again', retry_at => now() - interval '1 hour') AS state FROM jobs WHERE kind = 'tie-2';
SELECT kind, attempt FROM jobs_claim('w', 10, queues => '{ties}');
