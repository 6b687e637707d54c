-- jobs_snooze: puts a job the caller holds back in the queue until run_at, without spending an attempt.
--
-- Promises: fenced like jobs_complete (false and no change when not held at this attempt
--           under a lease the caller's login took).
--           The job goes back to queued at run_at. attempts is never lowered, because the
--           attempt number is the fencing token and must not be handed out twice; instead
--           max_attempts is raised by one (saturating at 2147483647), so the snoozed attempt
--           does not count against the job's budget. A job snoozed at attempt 2147483647,
--           the integer limit, has no attempt number left for a next claim: it goes to dead
--           instead (finished_at = now(), last_error 'no attempt left: attempts is at its
--           limit, 2147483647', also appended to errors), and the call still returns true.
--           So no ordinary route leaves a queued job at the limit for a claim to meet (the
--           claims' own guard, see jobs_claim, is for rows edited by hand). A job whose
--           unique_key an on_duplicate 'replace' gave to a newer job while it ran goes to
--           cancelled instead ('superseded by job N', see _jobs_unique_key_superseded), and
--           the call still returns true (jobs_get shows the state). A job that is
--           ready at once NOTIFYs
--           jobs_ready at commit, and so does any snooze of a job whose queue has a
--           concurrency limit or ordered keys (its slot came back).
-- Locks:    the job's row, until the caller's transaction ends.
-- States:   running -> queued (at attempts 2147483647: running -> dead; superseded:
--           running -> cancelled); max_attempts + 1,
--           lease cleared (lease_role too).
-- Time:     now() (transaction start).
-- Errors:   22023 when id, attempt or run_at is NULL, or run_at is infinite.
CREATE OR REPLACE FUNCTION jobs_snooze(id bigint, attempt integer, run_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
    v_claim bigint;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_snooze.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_snooze', 'id', 'must not be NULL');
    END IF;
    IF jobs_snooze.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_snooze', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_snooze.run_at IS NULL OR NOT isfinite(jobs_snooze.run_at) THEN
        PERFORM _jobs_invalid('jobs_snooze', 'run_at', 'must be a finite timestamp');
    END IF;

    UPDATE jobs j
    SET state = CASE WHEN j.attempts < 2147483647 THEN 'queued' ELSE 'dead' END::jobs_state,
        run_at = CASE WHEN j.attempts < 2147483647 THEN jobs_snooze.run_at ELSE j.run_at END,
        finished_at = CASE WHEN j.attempts < 2147483647 THEN j.finished_at ELSE now() END,
        last_error = CASE WHEN j.attempts < 2147483647 THEN j.last_error
                          ELSE 'no attempt left: attempts is at its limit, 2147483647' END,
        errors = CASE WHEN j.attempts < 2147483647 THEN j.errors
                      ELSE _jobs_errors_append(j.errors, jsonb_build_object(
                               'attempt', j.attempts, 'at', now(),
                               'error', 'no attempt left: attempts is at its limit, 2147483647',
                               'worker', j.lease_holder)) END,
        -- Saturates rather than overflowing, so a job at the int limit can still snooze.
        max_attempts = CASE WHEN j.max_attempts < 2147483647 THEN j.max_attempts + 1 ELSE j.max_attempts END,
        lease_expires_at = NULL,
        lease_role = NULL
    WHERE j.id = jobs_snooze.id
      AND j.state = 'running'
      AND j.attempts = jobs_snooze.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.queue, j.claim_id INTO v_queue, v_claim;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- Queued again, the job is back in jobs_queued (trigger jobs_queued_sync).
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    IF jobs_snooze.run_at <= now() THEN
        PERFORM pg_notify('jobs_ready', v_queue);
    ELSE
        -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
        PERFORM pg_notify('jobs_ready', q.queue)
        FROM jobs_queues q
        WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    END IF;
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_snooze(bigint, integer, timestamptz) IS
    'skiplock: running -> queued at run_at without spending an attempt (fenced; raises max_attempts, never lowers attempts).';
