-- jobs_fail: records a failed attempt and schedules the retry, if the caller still holds the job.
--
-- Promises: fenced like jobs_complete: acts only when the job is running at exactly this
--           attempt under a lease the caller's login took, else returns NULL and changes
--           nothing. Sets last_error and appends {"attempt", "at", "error", "worker"} to the
--           errors history (_jobs_errors_append: the first entry and the newest 99 are kept,
--           so a job failing forever never reaches jsonb's size limit). When attempts has
--           reached max_attempts the job becomes dead; otherwise it is queued again at
--           retry_at, or when retry_at is NULL at now() + jobs_backoff(attempt). Returns the
--           job's new state ('queued' or 'dead'; 'cancelled' for a job whose unique_key a
--           replace gave to a newer job while it ran, see _jobs_unique_key_superseded). A retry that is ready at once NOTIFYs
--           jobs_ready at commit, and so does any failure of a job whose queue has a
--           concurrency limit or ordered keys (its slot came back; dead lets its key's next
--           job run). error is stored up to its first 10000
--           characters.
-- Locks:    the job's row, until the caller's transaction ends.
-- States:   running -> queued (retry) or running -> dead (attempts exhausted; finished_at set);
--           clears lease_expires_at and lease_role.
-- Time:     now() (transaction start).
-- Errors:   22023 when id, attempt or error is NULL, or retry_at is infinite.
CREATE OR REPLACE FUNCTION jobs_fail(id bigint, attempt integer, error text, retry_at timestamptz DEFAULT NULL)
RETURNS jobs_state
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_state  jobs_state;
    v_queue  text;
    v_run_at timestamptz;
    v_claim  bigint;
    v_superseded boolean;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_fail.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_fail', 'id', 'must not be NULL');
    END IF;
    IF jobs_fail.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_fail', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_fail.error IS NULL THEN
        PERFORM _jobs_invalid('jobs_fail', 'error', 'must not be NULL');
    END IF;
    IF NOT isfinite(jobs_fail.retry_at) THEN
        PERFORM _jobs_invalid('jobs_fail', 'retry_at', 'must be NULL or a finite timestamp');
    END IF;

    UPDATE jobs j
    SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'queued' END::jobs_state,
        run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at
                      ELSE coalesce(jobs_fail.retry_at, now() + jobs_backoff(j.attempts)) END,
        finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
        lease_expires_at = NULL,
        lease_role = NULL,
        last_error = left(jobs_fail.error, 10000),
        errors = _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                  'error', left(jobs_fail.error, 10000),
                                                                  'worker', j.lease_holder))
    WHERE j.id = jobs_fail.id
      AND j.state = 'running'
      AND j.attempts = jobs_fail.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.state, j.queue, j.run_at, j.claim_id, j.superseded_by IS NOT NULL
    INTO v_state, v_queue, v_run_at, v_claim, v_superseded;
    IF v_state IS NULL THEN
        RETURN NULL;
    END IF;
    IF v_superseded AND v_state = 'queued' THEN
        -- Cancelled instead when its key went to a newer job (_jobs_unique_key_superseded,
        -- after the update RETURNING saw).
        SELECT j.state INTO v_state FROM jobs j WHERE j.id = jobs_fail.id;
    END IF;
    -- Requeued, the job is back in jobs_queued (trigger jobs_queued_sync).
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    IF v_state = 'queued' AND v_run_at <= now() THEN
        PERFORM pg_notify('jobs_ready', v_queue);
    ELSE
        -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
        PERFORM pg_notify('jobs_ready', q.queue)
        FROM jobs_queues q
        WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    END IF;
    RETURN v_state;
END;
$$;

COMMENT ON FUNCTION jobs_fail(bigint, integer, text, timestamptz) IS
    'skiplock: records a failed attempt (fenced) and requeues with backoff, or marks dead when attempts are exhausted; returns the new state, NULL when not held.';
