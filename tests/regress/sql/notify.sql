-- NOTIFY jobs_ready (payload: the queue name) tells workers a job became ready now. This
-- session LISTENs and makes every change itself: a notification is delivered at commit
-- and the server sends it before reporting the statement done, so psql prints it right
-- after the result of the statement (or COMMIT) that committed it. No line means no
-- NOTIFY. The runner hides the sender's PID and sorts the lines of one commit.
\set VERBOSITY terse
LISTEN jobs_ready;

-- enqueue of a ready job wakes its queue
SELECT jobs_enqueue('a') AS a \gset
SELECT jobs_enqueue('b', queue => 'mail') AS b \gset
-- a job that is not due yet wakes nobody
SELECT jobs_enqueue('later', run_at => now() + interval '1 hour') AS later \gset
-- nor does a rolled-back enqueue
BEGIN;
SELECT jobs_enqueue('rolled-back') > 0 AS enqueued;
ROLLBACK;
-- a transaction wakes each queue once, at commit
BEGIN;
SELECT jobs_enqueue('c') > 0 AS enqueued;
SELECT jobs_enqueue('d') > 0 AS enqueued;
SELECT jobs_enqueue('e', queue => 'mail') > 0 AS enqueued;
COMMIT;

-- enqueue_many: one notification per queue with a ready job
SELECT count(*) AS enqueued
FROM jobs_enqueue_many(ARRAY['f', 'g', 'h', 'i'], queues => ARRAY['alpha', 'beta', 'alpha', 'gamma'],
                       run_ats => ARRAY[now(), now(), now(), now() + interval '1 hour']);
-- the same path with unique keys
SELECT count(*) AS enqueued
FROM jobs_enqueue_many(ARRAY['j', 'k'], queues => ARRAY['delta', 'delta'], unique_keys => ARRAY['1', '2']);
-- a unique enqueue that finds the key's live job adds nothing ready, so wakes nobody
SELECT jobs_enqueue('j', queue => 'delta', unique_key => '1') > 0 AS found;

-- claim, complete, heartbeat and cancel wake nobody
SELECT count(*) AS claimed FROM jobs_claim('worker-1', 100, queues => '{default}');
SELECT jobs_complete(:a, 1) AS completed;
SELECT jobs_heartbeat(id, 1) AS heartbeat FROM jobs WHERE queue = 'default' AND state = 'running' ORDER BY id LIMIT 1;
SELECT jobs_cancel(:b) AS cancelled;

-- fail: a retry that is due now wakes the queue; one in the future (backoff) does not
SELECT jobs_enqueue('f1', queue => 'retry') AS f1 \gset
SELECT jobs_enqueue('f2', queue => 'retry') AS f2 \gset
SELECT count(*) AS claimed FROM jobs_claim('worker-1', 2, queues => '{retry}');
SELECT jobs_fail(:f1, 1, 'boom', retry_at => now()) AS state;
SELECT jobs_fail(:f2, 1, 'boom') AS state;
-- a failure that kills the job does not
SELECT jobs_enqueue('f3', queue => 'final', max_attempts => 1) AS f3 \gset
SELECT count(*) AS claimed FROM jobs_claim('worker-1', queues => '{final}');
SELECT jobs_fail(:f3, 1, 'boom') AS state;
-- a stale fail changes nothing and wakes nobody
SELECT jobs_fail(:f3, 1, 'boom', retry_at => now()) AS state;

-- snooze: due now wakes the queue, in the future does not
SELECT jobs_enqueue('s1', queue => 'snooze') AS s1 \gset
SELECT jobs_enqueue('s2', queue => 'snooze') AS s2 \gset
SELECT count(*) AS claimed FROM jobs_claim('worker-1', 2, queues => '{snooze}');
SELECT jobs_snooze(:s1, 1, now()) AS snoozed;
SELECT jobs_snooze(:s2, 1, now() + interval '1 hour') AS snoozed;

-- retry of a dead or cancelled job wakes its queue
SELECT jobs_retry(:f3) AS retried;
SELECT jobs_retry(:b) AS retried;
SELECT jobs_retry(:b) AS retried_again;

-- requeue_expired wakes each queue that got a job back, once; a job it kills wakes nobody
SELECT jobs_enqueue('x1', queue => 'expire') AS x1 \gset
SELECT jobs_enqueue('x2', queue => 'expire') AS x2 \gset
SELECT jobs_enqueue('x3', queue => 'expire-last', max_attempts => 1) AS x3 \gset
SELECT count(*) AS claimed FROM jobs_claim('worker-1', 3, queues => '{expire,expire-last}', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT jobs_requeue_expired() AS requeued;
SELECT queue, state FROM jobs WHERE id IN (:x1, :x2, :x3) ORDER BY id;

UNLISTEN jobs_ready;
SELECT jobs_enqueue('unheard') > 0 AS enqueued;
