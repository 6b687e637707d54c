-- jobs_requeue_expired: takes back jobs whose lease has expired; returns how many.
--
-- Promises: every running job with lease_expires_at < now() goes back to queued, ready at
--           once, or to dead when its attempts have reached max_attempts. last_error says
--           the lease expired (when, in UTC, whatever the session's TimeZone) and who held
--           it, and the errors history gets the same entry (_jobs_errors_append: the first
--           entry and the newest 99 are kept).
--           The expired attempt stays counted, so the next claim gets a new fencing token
--           and the old holder's complete/fail/heartbeat are refused. Safe to call from many
--           sessions at once: rows another session is changing are skipped (SKIP LOCKED),
--           and a job whose lease was extended or that was completed meanwhile is rechecked
--           and left alone. It looks only at the jobs listed by jobs_claims rows whose
--           expires_at has passed (cheap when nothing expired: one probe of
--           jobs_claims_expires_idx); a claim whose jobs still run under later leases
--           (heartbeats) gets the earliest of those as its new expires_at, and a claim with
--           no job running under it any more goes.
--           NOTIFYs jobs_ready for each queue that got a job back, and for each
--           concurrency-limited or ordered queue (jobs_queues) whose jobs went dead (slots
--           came back, keys' next jobs may run).
-- Locks:    the expired rows, then their jobs_claims rows (in claim_id order; the ones whose
--           expiry moves SKIP LOCKED), until the caller's transaction ends.
--           A job going dead with children (has_children) also cancels its waiting
--           descendants (jobs_finished_cascade, one dead job after the other); a batch of
--           completions locking shared children in another order can deadlock with that, and
--           the loser gets 40P01 (jobs_maintain runs it again next round).
-- States:   running -> queued, or running -> dead (finished_at set); clears lease_expires_at
--           and lease_role.
-- Time:     now() (transaction start).
-- Errors:   none.
CREATE OR REPLACE FUNCTION jobs_requeue_expired()
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_claims   bigint[];
    v_count    integer;
    v_released bigint[];
    v_queues   text[];
    v_claim    record;
BEGIN
    v_claims := ARRAY(SELECT c.claim_id FROM jobs_claims c WHERE c.expires_at < now());
    IF cardinality(v_claims) = 0 THEN
        RETURN 0;
    END IF;

    WITH expired AS (
        SELECT j.id
        FROM jobs j
        WHERE j.id = ANY (ARRAY(SELECT u.id
                                FROM jobs_claims c
                                CROSS JOIN LATERAL unnest(c.ids) AS u(id)
                                WHERE c.claim_id = ANY (v_claims)))
          AND j.claim_id = ANY (v_claims)
          AND j.state = 'running'
          AND j.lease_expires_at < now()
        ORDER BY j.id
        FOR NO KEY UPDATE SKIP LOCKED
    ), requeued AS (
        UPDATE jobs j
        SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'queued' END::jobs_state,
            run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at ELSE now() END,
            finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
            last_error = format('lease expired at %s (held by %s, attempt %s)',
                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                j.lease_holder, j.attempts),
            errors = _jobs_errors_append(j.errors, jsonb_build_object(
                'attempt', j.attempts, 'at', now(),
                'error', format('lease expired at %s (held by %s, attempt %s)',
                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                j.lease_holder, j.attempts),
                'worker', j.lease_holder)),
            lease_expires_at = NULL,
            lease_role = NULL
        -- Through jobs_pkey; a join with expired may be planned as a scan of the whole table.
        WHERE j.id = ANY (ARRAY(SELECT expired.id FROM expired))
          AND j.state = 'running'
          AND j.lease_expires_at < now()
        -- Queued again, a job is back in jobs_queued (trigger jobs_queued_sync).
        RETURNING j.id, j.queue, j.state, j.claim_id
    )
    SELECT count(*)::integer, coalesce(array_agg(r.claim_id), '{}'),
           coalesce(array_agg(DISTINCT r.queue) FILTER (
               WHERE r.state = 'queued'
                  -- a dead job of a concurrency-limited queue gives its slot back too
                  OR EXISTS (SELECT FROM jobs_queues q
                             WHERE q.queue = r.queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered))),
               '{}')
    INTO v_count, v_released, v_queues
    FROM requeued r;

    PERFORM _jobs_claims_release(v_released);

    -- What is left of each claim looked at: the jobs still running under it (heartbeats moved
    -- their leases on, or another session held them). The earliest of their leases is when to
    -- look again; a claim with none goes. SKIP LOCKED, after the waits above in claim_id
    -- order, so this cannot deadlock with a completion; a claim skipped stays due.
    FOR v_claim IN
        SELECT c.claim_id,
               (SELECT min(j.lease_expires_at)
                FROM unnest(c.ids) AS u(id)
                -- One primary-key probe per listed job, whatever the statistics (OFFSET 0 keeps
                -- the planner from joining the tables another way).
                CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = u.id OFFSET 0) j
                WHERE j.claim_id = c.claim_id AND j.state = 'running') AS next_expiry
        FROM jobs_claims c
        WHERE c.claim_id = ANY (v_claims)
        ORDER BY c.claim_id
        FOR NO KEY UPDATE SKIP LOCKED
    LOOP
        IF v_claim.next_expiry IS NULL THEN
            DELETE FROM jobs_claims c WHERE c.claim_id = v_claim.claim_id;
        ELSE
            UPDATE jobs_claims c SET expires_at = v_claim.next_expiry WHERE c.claim_id = v_claim.claim_id;
        END IF;
    END LOOP;

    PERFORM pg_notify('jobs_ready', q.queue) FROM unnest(v_queues) AS q(queue);
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_requeue_expired() IS
    'skiplock: running jobs whose lease expired go back to queued (or dead when out of attempts); safe to call concurrently; returns the count.';
