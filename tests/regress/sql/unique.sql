-- unique_key: at most one live (queued or running) job per queue and key. Enqueuing a key
-- that is live returns the live job's id and inserts nothing; once that job finishes
-- (done, dead or cancelled) the key is free again. (Concurrent enqueues of one key are
-- covered by tests/isolation/specs/unique_enqueue.spec.)
\set VERBOSITY terse

-- the first enqueue of a key inserts; the next ones return the same job
SELECT jobs_enqueue('sync', '{"n": 1}', unique_key => 'user:1') AS sync \gset
SELECT jobs_enqueue('sync', '{"n": 2}', unique_key => 'user:1') = :sync AS same_job;
SELECT jobs_enqueue('other-kind', '{"n": 3}', unique_key => 'user:1', priority => 5,
                    run_at => now() + interval '1 hour') = :sync AS same_job;
-- the live job is left as it was: the later payload, kind and options are ignored
SELECT count(*) AS jobs, min(kind) AS kind, min(payload::text) AS payload, min(priority) AS priority,
       bool_and(run_at <= now()) AS ready
FROM jobs;

-- keys are per queue, and jobs without a key never collide
SELECT jobs_enqueue('sync', unique_key => 'user:1', queue => 'mail') = :sync AS same_job;
SELECT jobs_enqueue('sync', unique_key => 'user:2') = :sync AS same_job;
SELECT jobs_enqueue('sync') = :sync AS same_job, jobs_enqueue('sync') = :sync AS same_job_again;
SELECT queue, unique_key, count(*) FROM jobs GROUP BY queue, unique_key ORDER BY queue, unique_key;

-- a running job still holds its key
SELECT id = :sync AS claimed_sync, attempt FROM jobs_claim('worker-1', queues => '{default}');
SELECT jobs_enqueue('sync', unique_key => 'user:1') = :sync AS same_job;

-- done frees the key: the next enqueue makes a new job
SELECT jobs_complete(:sync, 1) AS completed;
SELECT jobs_enqueue('sync', unique_key => 'user:1') AS sync2 \gset
SELECT :sync2 > :sync AS new_job;
SELECT id = :sync AS first, state FROM jobs WHERE unique_key = 'user:1' AND queue = 'default' ORDER BY id;

-- dead frees the key (each case in a queue of its own, so the claims take the job meant)
SELECT jobs_enqueue('fragile', queue => 'q-dead', unique_key => 'k', max_attempts => 1) AS fragile \gset
SELECT id = :fragile AS claimed_fragile, attempt FROM jobs_claim('worker-1', queues => '{q-dead}');
SELECT jobs_fail(:fragile, 1, 'gave up') AS state;
SELECT jobs_enqueue('fragile', queue => 'q-dead', unique_key => 'k') AS fragile2 \gset
SELECT :fragile2 > :fragile AS new_job;

-- so does cancelled
SELECT jobs_enqueue('doomed', queue => 'q-cancel', unique_key => 'k') AS doomed \gset
SELECT jobs_cancel(:doomed) AS cancelled;
SELECT jobs_enqueue('doomed', queue => 'q-cancel', unique_key => 'k') > :doomed AS new_job;

-- a retried dead job cannot take back a key that a newer live job holds: 23505, no change
SELECT jobs_retry(:fragile) AS retried;
SELECT :'SQLSTATE' AS sqlstate;
SELECT id = :fragile AS fragile, state FROM jobs WHERE queue = 'q-dead' ORDER BY id;
-- once the key is free, it can
SELECT jobs_cancel(:fragile2) AS cancelled;
SELECT jobs_retry(:fragile) AS retried;
SELECT id = :fragile AS fragile, state, max_attempts FROM jobs WHERE queue = 'q-dead' ORDER BY id;

-- enqueue_many: each input gets the id of the job that holds its key, in input order; a
-- key repeated within the call, or already live, yields that job's id
SELECT count(*) AS before FROM jobs \gset
SELECT t.ord, t.id = :sync2 AS is_sync2, t.id = lag(t.id) OVER (ORDER BY t.ord) AS same_as_previous,
       t.id > :sync2 AS new_job
FROM jobs_enqueue_many(ARRAY['m', 'm', 'm', 'm', 'm'],
                       unique_keys => ARRAY['user:1', 'batch:a', 'batch:a', NULL, 'batch:b'])
    WITH ORDINALITY AS t(id, ord)
ORDER BY t.ord;
SELECT count(*) - :before AS inserted FROM jobs;
SELECT unique_key, count(*) FROM jobs WHERE kind = 'm' GROUP BY unique_key ORDER BY unique_key;
SELECT max(id) AS last_batch FROM jobs \gset
-- the same call again inserts only the job without a key and returns the others' ids
SELECT t.ord, t.id = :sync2 AS is_sync2, t.id = lag(t.id) OVER (ORDER BY t.ord) AS same_as_previous,
       t.id > :last_batch AS new_job
FROM jobs_enqueue_many(ARRAY['m', 'm', 'm', 'm', 'm'],
                       unique_keys => ARRAY['user:1', 'batch:a', 'batch:a', NULL, 'batch:b'])
    WITH ORDINALITY AS t(id, ord)
ORDER BY t.ord;
SELECT count(*) - :before AS inserted FROM jobs;
SELECT unique_key, count(*) FROM jobs WHERE kind = 'm' GROUP BY unique_key ORDER BY unique_key;
