-- jobs_claim: leases up to max_jobs ready jobs to a worker and returns them.
--
-- Promises: takes queued jobs with run_at <= now() from the given queues (NULL: every
--           queue), best first by (priority, run_at, id), and returns them in that order.
--           No two callers ever get the same job: rows are picked with FOR NO KEY UPDATE
--           SKIP LOCKED, so concurrent claimers pass over each other's rows instead of
--           waiting. FOR NO KEY UPDATE is the lock the UPDATE takes anyway; unlike FOR
--           UPDATE it does not conflict with the FOR KEY SHARE lock that an insert into a
--           table with a foreign key to jobs takes, so such inserts hide no job from claims.
--           Each claimed job moves to running with attempts + 1; the new attempts value is
--           the job's fencing token (returned as attempt) that jobs_complete, jobs_fail,
--           jobs_heartbeat and jobs_snooze must quote back. The claim also records the
--           caller's login (session_user, also inside this SECURITY DEFINER function and
--           after SET ROLE) as the job's lease_role: the fenced calls of every other login
--           do not match the job (see jobs_complete). Returns no rows when nothing is
--           ready. Expired leases are not reclaimed here: jobs_requeue_expired does that.
--           Each row also carries the job's meta (jobs_enqueue's; usually NULL).
--           Flow control (jobs_queues): a paused queue gives no jobs; a queue with
--           max_running, per_key or a rate limit never goes over them (see
--           _jobs_claim_limited). When no requested queue (queues NULL: no queue at all)
--           has a row in jobs_queues that pauses or limits it, the claim is what it was
--           before flow control: one probe of the tiny jobs_queues table, then one ordered
--           range scan of jobs_ready_idx per queue. Settings committed while a claim runs
--           bind the claims that start after it. A claim in a REPEATABLE READ or SERIALIZABLE
--           transaction sees jobs_queues as of its snapshot: settings committed after the
--           snapshot do not bind it (call it in autocommit or READ COMMITTED).
-- Locks:    row locks on the claimed jobs until the caller's transaction ends (call it in
--           autocommit or a short transaction). With several queues, rows examined but not
--           chosen stay locked until then too, and other claimers skip them meanwhile.
--           A limited queue's jobs_queues row is locked until then too (claims of that
--           queue take turns).
-- States:   queued -> running; sets lease_holder = worker, lease_role = session_user,
--           lease_expires_at = now() + lease, started_at = now(). A picked job whose attempts
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
AS $$
#variable_conflict use_column
DECLARE
    -- The login claiming, recorded as each job's lease_role: session_user is the login even
    -- inside this SECURITY DEFINER function and after SET ROLE (the fenced calls compare it).
    v_login regrole := to_regrole(quote_ident(session_user));
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

    -- The fast path's only cost: queues without settings have no row here.
    IF EXISTS (
        SELECT FROM jobs_queues q
        WHERE (jobs_claim.queues IS NULL OR q.queue = ANY (jobs_claim.queues))
          AND (q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL)
    ) THEN
        RETURN QUERY
        SELECT * FROM _jobs_claim_limited(jobs_claim.worker, jobs_claim.max_jobs, jobs_claim.queues, jobs_claim.lease);
        RETURN;
    END IF;

    IF cardinality(jobs_claim.queues) = 1 THEN
        -- The common case, one queue: a single ordered range scan of jobs_ready_idx.
        RETURN QUERY
        WITH picked AS (
            SELECT j.id
            FROM jobs j
            WHERE j.state = 'queued'
              AND j.queue = jobs_claim.queues[array_lower(jobs_claim.queues, 1)]
              AND j.run_at <= now()
            ORDER BY j.priority, j.run_at, j.id
            LIMIT jobs_claim.max_jobs
            FOR NO KEY UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE jobs j
            -- A job whose attempts are at the integer limit has no attempt number (fencing token)
            -- left: it goes dead here, with the reason in last_error, instead of raising 22003
            -- for the whole batch. Only a forever-snoozed job gets there (jobs_snooze).
            SET state = CASE WHEN j.attempts < 2147483647 THEN 'running' ELSE 'dead' END::jobs_state,
                attempts = CASE WHEN j.attempts < 2147483647 THEN j.attempts + 1 ELSE j.attempts END,
                lease_holder = CASE WHEN j.attempts < 2147483647 THEN jobs_claim.worker ELSE j.lease_holder END,
                lease_role = CASE WHEN j.attempts < 2147483647 THEN v_login END,
                lease_expires_at = CASE WHEN j.attempts < 2147483647 THEN now() + jobs_claim.lease END,
                started_at = CASE WHEN j.attempts < 2147483647 THEN now() ELSE j.started_at END,
                finished_at = CASE WHEN j.attempts < 2147483647 THEN j.finished_at ELSE now() END,
                last_error = CASE WHEN j.attempts < 2147483647 THEN j.last_error ELSE 'no attempt left: attempts is at its limit, 2147483647' END,
                errors = CASE WHEN j.attempts < 2147483647 THEN j.errors
                              ELSE _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                                    'error', 'no attempt left: attempts is at its limit, 2147483647',
                                                                                    'worker', jobs_claim.worker)) END
            -- = ANY(ARRAY(...)) makes the update find its rows through jobs_pkey; a join
            -- with picked may be planned as a hash join over a scan of the whole table.
            WHERE j.id = ANY (ARRAY(SELECT picked.id FROM picked))
            RETURNING j.id, j.queue, j.kind, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
                      j.lease_expires_at, j.created_at, j.meta, j.state
        )
        SELECT c.id, c.queue, c.kind, c.payload, c.attempts, c.max_attempts, c.priority, c.run_at,
               c.lease_expires_at, c.created_at, c.meta
        FROM claimed c WHERE c.state = 'running' ORDER BY c.priority, c.run_at, c.id;
    ELSE
        -- Several or all queues: take the best max_jobs of each queue (each an ordered scan of
        -- jobs_ready_idx), then the best max_jobs of those. For all queues the queue names come
        -- from a skip scan of the same index, one probe per queue that has queued jobs.
        RETURN QUERY
        WITH RECURSIVE all_queues AS (
            (SELECT j.queue FROM jobs j WHERE j.state = 'queued' ORDER BY j.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT j.queue FROM jobs j
                    WHERE j.state = 'queued' AND j.queue > a.queue
                    ORDER BY j.queue LIMIT 1)
            FROM all_queues a
            WHERE a.queue IS NOT NULL
        ), wanted AS (
            SELECT a.queue FROM all_queues a WHERE a.queue IS NOT NULL AND jobs_claim.queues IS NULL
            UNION
            SELECT q.queue FROM unnest(jobs_claim.queues) AS q(queue)
        ), candidates AS (
            SELECT c.id, c.priority, c.run_at
            FROM wanted w
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.run_at
                FROM jobs j
                WHERE j.state = 'queued'
                  AND j.queue = w.queue
                  AND j.run_at <= now()
                ORDER BY j.priority, j.run_at, j.id
                LIMIT jobs_claim.max_jobs
                FOR NO KEY UPDATE SKIP LOCKED
            ) c
        ), picked AS (
            SELECT c.id FROM candidates c
            ORDER BY c.priority, c.run_at, c.id
            LIMIT jobs_claim.max_jobs
        ), claimed AS (
            UPDATE jobs j
            -- A job whose attempts are at the integer limit has no attempt number (fencing token)
            -- left: it goes dead here, with the reason in last_error, instead of raising 22003
            -- for the whole batch. Only a forever-snoozed job gets there (jobs_snooze).
            SET state = CASE WHEN j.attempts < 2147483647 THEN 'running' ELSE 'dead' END::jobs_state,
                attempts = CASE WHEN j.attempts < 2147483647 THEN j.attempts + 1 ELSE j.attempts END,
                lease_holder = CASE WHEN j.attempts < 2147483647 THEN jobs_claim.worker ELSE j.lease_holder END,
                lease_role = CASE WHEN j.attempts < 2147483647 THEN v_login END,
                lease_expires_at = CASE WHEN j.attempts < 2147483647 THEN now() + jobs_claim.lease END,
                started_at = CASE WHEN j.attempts < 2147483647 THEN now() ELSE j.started_at END,
                finished_at = CASE WHEN j.attempts < 2147483647 THEN j.finished_at ELSE now() END,
                last_error = CASE WHEN j.attempts < 2147483647 THEN j.last_error ELSE 'no attempt left: attempts is at its limit, 2147483647' END,
                errors = CASE WHEN j.attempts < 2147483647 THEN j.errors
                              ELSE _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                                    'error', 'no attempt left: attempts is at its limit, 2147483647',
                                                                                    'worker', jobs_claim.worker)) END
            -- = ANY(ARRAY(...)) makes the update find its rows through jobs_pkey; a join
            -- with picked may be planned as a hash join over a scan of the whole table.
            WHERE j.id = ANY (ARRAY(SELECT picked.id FROM picked))
            RETURNING j.id, j.queue, j.kind, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
                      j.lease_expires_at, j.created_at, j.meta, j.state
        )
        SELECT c.id, c.queue, c.kind, c.payload, c.attempts, c.max_attempts, c.priority, c.run_at,
               c.lease_expires_at, c.created_at, c.meta
        FROM claimed c WHERE c.state = 'running' ORDER BY c.priority, c.run_at, c.id;
    END IF;
END;
$$;

COMMENT ON FUNCTION jobs_claim(text, integer, text[], interval) IS
    'skiplock: leases up to max_jobs ready jobs (priority, run_at, id order; FOR NO KEY UPDATE SKIP LOCKED) to worker and returns them with their attempt (fencing token).';
