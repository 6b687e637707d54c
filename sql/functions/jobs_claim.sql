-- jobs_claim: leases up to max_jobs ready jobs to a worker and returns them.
--
-- Promises: takes queued jobs with run_at <= now() from the given queues (NULL: every
--           queue), best first by (priority, run_at, id), and returns them in that order.
--           No two callers ever get the same job: the queued jobs' rows in jobs_queued are
--           picked FOR UPDATE SKIP LOCKED, so concurrent claimers pass over each other's
--           picks instead of waiting, and each claim deletes the rows it takes. The job rows
--           themselves are then updated (FOR NO KEY UPDATE, which does not conflict with the
--           FOR KEY SHARE lock that an insert into a table with a foreign key to jobs takes).
--           The update is HOT: no index of jobs names a column it changes (fillfactor 40
--           leaves the room on the page). See _jobs_claim_take.
--           Each claimed job moves to running with attempts + 1; the new attempts value is
--           the job's fencing token (returned as attempt) that jobs_complete, jobs_fail,
--           jobs_heartbeat and jobs_snooze must quote back. The claim also records the
--           caller's login (session_user, also inside this SECURITY DEFINER function and
--           after SET ROLE) as the job's lease_role: the fenced calls of every other login
--           do not match the job (see jobs_complete). Returns no rows when nothing is
--           ready. Expired leases are not reclaimed here: jobs_requeue_expired does that.
--           Each row also carries the job's meta (jobs_enqueue's; usually NULL).
--           Flow control (jobs_queues): a paused queue gives no jobs; a queue with
--           max_running, per_key or a rate limit (queue-wide or per key) never goes over
--           them; a fair queue's jobs are taken round-robin across concurrency_keys; an
--           ordered queue runs the jobs of a key one at a time in id order (see
--           _jobs_claim_limited). When no requested queue (queues NULL: no queue at all)
--           has a row in jobs_queues that pauses, limits or shapes it, the claim is what it was
--           before flow control: one probe of jobs_queues (its primary key, per queue named;
--           queues NULL reads its rows, one per queue with settings), then one ordered range
--           scan of jobs_ready_idx per queue. Settings committed while a claim runs
--           bind the claims that start after it. A claim in a REPEATABLE READ or SERIALIZABLE
--           transaction sees jobs_queues as of its snapshot: settings committed after the
--           snapshot do not bind it (call it in autocommit or READ COMMITTED).
-- Locks:    the picked jobs_queued rows, then the claimed jobs' rows, until the caller's
--           transaction ends (call it in autocommit or a short transaction). A job row that
--           another transaction holds (SELECT ... FOR UPDATE of jobs) is waited for. With
--           several queues, jobs_queued rows examined but not chosen stay locked until then
--           too, and other claimers skip them meanwhile.
--           A limited queue's jobs_queues row is locked until then too (claims of that
--           queue take turns).
-- States:   queued -> running; sets lease_holder = worker, lease_role = session_user,
--           lease_expires_at = now() + lease, started_at = now(), claim_id (the claim's
--           jobs_claims row, which lists the lease for jobs_requeue_expired). A picked job whose attempts
--           are already at 2147483647 (the integer limit: no new fencing token left) goes
--           queued -> dead instead, with
--           finished_at = now(), last_error 'no attempt left: attempts is at its limit,
--           2147483647' (also appended to errors), and is not returned; the others of the
--           batch are claimed as usual. jobs_retry cannot give it another attempt.
-- Time:     now() (transaction start) for readiness, the lease and started_at.
-- Errors:   22023 when worker is NULL/empty/longer than 200 bytes, max_jobs is NULL or not
--           in 1..10000, queues is empty, multidimensional or contains a NULL, or lease is
--           NULL, <= 0 or longer than 100 years. 0A000 when a requested queue has a
--           concurrency or rate limit and the transaction is not READ COMMITTED.
CREATE OR REPLACE FUNCTION jobs_claim(
    worker   text,
    max_jobs integer  DEFAULT 1,
    queues   text[]   DEFAULT NULL,
    lease    interval DEFAULT '5 minutes'
)
RETURNS SETOF jobs_claimed
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
-- jobs_queued's statistics lag its size (empty at one ANALYZE, a backlog of a million by the
-- next): estimating a few rows, the planner would read every queued job of the queue with a
-- bitmap or sequential scan and sort them, for each claim. Without either, the pick is the
-- ordered range scan of jobs_ready_idx that stops at max_jobs, whatever the statistics say.
SET enable_bitmapscan = off
SET enable_seqscan = off
-- With sequential scans off, a condition that no index serves (queues NULL: every queue) is
-- costed at 1e10, far above jit_above_cost, so every call would JIT-compile its statements
-- (about 100 ms each time where JIT is available).
SET jit = off
-- One plan per statement for every call: with the plans' cost depending on the arguments
-- (how many queues, max_jobs), PostgreSQL would otherwise plan the probe of jobs_queues and
-- the pick anew at each call, 0.16 ms together, a tenth of a claim of 100. Each statement is
-- written so that its one plan is the one every argument would get: ordered range scans of
-- jobs_ready_idx, and the probe split by whether queues is NULL. _jobs_claim_limited sets
-- its own.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    -- The jobs_queued rows picked, locked until the transaction ends.
    v_rows tid[];
    -- A requested queue is paused, limited or shaped.
    v_limited boolean;
BEGIN
    IF jobs_claim.worker IS NULL OR jobs_claim.worker = '' OR octet_length(jobs_claim.worker) > 200 THEN
        PERFORM _jobs_invalid('jobs_claim', 'worker', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_claim.max_jobs IS NULL OR jobs_claim.max_jobs < 1 OR jobs_claim.max_jobs > 10000 THEN
        PERFORM _jobs_invalid('jobs_claim', 'max_jobs', 'must be between 1 and 10000');
    END IF;
    IF array_ndims(jobs_claim.queues) > 1 THEN
        PERFORM _jobs_invalid('jobs_claim', 'queues', 'must be a one-dimensional array');
    END IF;
    IF jobs_claim.queues IS NOT NULL
       AND (cardinality(jobs_claim.queues) = 0 OR array_position(jobs_claim.queues, NULL) IS NOT NULL) THEN
        PERFORM _jobs_invalid('jobs_claim', 'queues', 'must be NULL (all queues) or a non-empty array without NULLs');
    END IF;
    IF jobs_claim.lease IS NULL OR jobs_claim.lease <= interval '0' OR jobs_claim.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_claim', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    -- The fast path's only cost: queues without settings have no row here. Two statements, so
    -- that the one plan each keeps (see plan_cache_mode above) probes jobs_queues_pkey for the
    -- queues named (a plan for both cases would read every row of jobs_queues).
    IF jobs_claim.queues IS NULL THEN
        v_limited := EXISTS (
            SELECT FROM jobs_queues q
            WHERE q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                  OR q.fair OR q.ordered);
    ELSE
        v_limited := EXISTS (
            SELECT FROM jobs_queues q
            WHERE q.queue = ANY (jobs_claim.queues)
              AND (q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                   OR q.fair OR q.ordered));
    END IF;
    IF v_limited THEN
        RETURN QUERY
        SELECT * FROM _jobs_claim_limited(jobs_claim.worker, jobs_claim.max_jobs, jobs_claim.queues, jobs_claim.lease);
        RETURN;
    END IF;

    IF cardinality(jobs_claim.queues) = 1 THEN
        -- The common case, one queue: a single ordered range scan of jobs_ready_idx.
        v_rows := ARRAY(
            SELECT q.ctid
            FROM jobs_queued q
            WHERE q.queue = jobs_claim.queues[array_lower(jobs_claim.queues, 1)]
              AND q.run_at <= now()
            ORDER BY q.priority, q.run_at, q.id
            LIMIT jobs_claim.max_jobs
            FOR UPDATE SKIP LOCKED);
    ELSE
        -- Several or all queues: take the best max_jobs of each queue (each an ordered scan of
        -- jobs_ready_idx), then the best max_jobs of those. For all queues the queue names come
        -- from a skip scan of the same index, one probe per queue that has queued jobs.
        v_rows := ARRAY(
            WITH RECURSIVE all_queues AS (
                (SELECT q.queue FROM jobs_queued q ORDER BY q.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT q.queue FROM jobs_queued q
                        WHERE q.queue > a.queue
                        ORDER BY q.queue LIMIT 1)
                FROM all_queues a
                WHERE a.queue IS NOT NULL
            ), wanted AS (
                SELECT a.queue FROM all_queues a WHERE a.queue IS NOT NULL AND jobs_claim.queues IS NULL
                UNION
                SELECT w.queue FROM unnest(jobs_claim.queues) AS w(queue)
            ), candidates AS (
                SELECT c.row, c.priority, c.run_at, c.id
                FROM wanted w
                CROSS JOIN LATERAL (
                    SELECT q.ctid AS row, q.priority, q.run_at, q.id
                    FROM jobs_queued q
                    WHERE q.queue = w.queue
                      AND q.run_at <= now()
                    ORDER BY q.priority, q.run_at, q.id
                    LIMIT jobs_claim.max_jobs
                    FOR UPDATE SKIP LOCKED
                ) c
            )
            SELECT c.row FROM candidates c
            ORDER BY c.priority, c.run_at, c.id
            LIMIT jobs_claim.max_jobs);
    END IF;
    RETURN QUERY SELECT * FROM _jobs_claim_take(jobs_claim.worker, jobs_claim.lease, v_rows);
END;
$$;

COMMENT ON FUNCTION jobs_claim(text, integer, text[], interval) IS
    'skiplock: leases up to max_jobs ready jobs (priority, run_at, id order; SKIP LOCKED) to worker and returns them with their attempt (fencing token).';
