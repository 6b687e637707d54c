-- jobs_cancel: cancels a job that has not finished.
--
-- Two forms. jobs_cancel(id) is the operator's: it cancels whoever holds the job.
-- jobs_cancel(id, attempt, error) is the worker's, fenced like jobs_fail: a handler that
-- decides its job can never succeed cancels it only while it still holds it, and only under
-- a lease its own login took.
--
-- jobs_cancel(id):
-- Promises: a waiting, queued or running job becomes cancelled and true is returned; a job in any
--           other state, or an unknown id, returns false and nothing changes. A worker still
--           running a cancelled job is fenced out: its jobs_complete, jobs_snooze and fenced
--           jobs_cancel return false, jobs_fail returns NULL and jobs_heartbeat returns false
--           (the driver then cancels the handler's context). When the job's queue has a
--           concurrency limit or ordered keys, NOTIFYs jobs_ready with the queue name at
--           commit (a running job's slot came back, or its key's next job may run). Its children cancel or run as for any parent that ends
--           cancelled (_jobs_finished).
-- Locks:    the job's row, until the caller's transaction ends; waits for a claim or
--           completion in progress on it to commit.
-- States:   waiting, queued or running -> cancelled; finished_at = now(), lease cleared
--           (lease_role too).
-- Time:     now() (transaction start).
-- Errors:   22023 when id is NULL.
CREATE OR REPLACE FUNCTION jobs_cancel(id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
    v_state jobs_state;
    v_claim bigint;
BEGIN
    IF jobs_cancel.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'id', 'must not be NULL');
    END IF;

    -- A queued job leaves jobs_queued first: the order claims lock in. A claim holding the
    -- row is waited for; the job is then running, and cancelled as such.
    DELETE FROM jobs_queued q
    WHERE (q.queue, q.priority, q.run_at, q.id) =
          (SELECT j.queue, j.priority, j.run_at, j.id FROM jobs j WHERE j.id = jobs_cancel.id AND j.state = 'queued');

    SELECT j.state, j.claim_id INTO v_state, v_claim
    FROM jobs j
    WHERE j.id = jobs_cancel.id
    FOR NO KEY UPDATE;
    IF v_state IS NULL OR v_state NOT IN ('waiting', 'queued', 'running') THEN
        RETURN false;
    END IF;

    UPDATE jobs j
    SET state = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL,
        lease_role = NULL
    WHERE j.id = jobs_cancel.id
    RETURNING j.queue INTO v_queue;
    IF v_state = 'running' THEN
        PERFORM _jobs_claims_release(ARRAY[v_claim]);
    END IF;

    -- A slot of a concurrency-limited queue may have come back (when the job was running):
    -- wake the workers waiting for one.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_cancel(bigint) IS
    'skiplock: waiting, queued or running -> cancelled; the holder''s later complete returns false and fail returns NULL.';

-- jobs_cancel(id, attempt, error):
-- Promises: fenced like jobs_complete: acts only when the job is running at exactly this
--           attempt under a lease the caller's login took, else returns false and changes nothing. The job becomes cancelled (no
--           further attempts; jobs_retry can bring it back) and true is returned. Sets
--           last_error and appends {"attempt", "at", "error", "worker"} to the errors
--           history, as jobs_fail does (capped by _jobs_errors_append). error is stored up to
--           its first 10000 characters.
--           NOTIFYs jobs_ready at commit when the job's queue has a concurrency limit or
--           ordered keys.
-- Locks:    the job's row, until the caller's transaction ends.
-- States:   running -> cancelled; finished_at = now(), lease cleared (lease_role too).
-- Time:     now() (transaction start).
-- Errors:   22023 when id, attempt or error is NULL.
CREATE OR REPLACE FUNCTION jobs_cancel(id bigint, attempt integer, error text)
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
    IF jobs_cancel.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'id', 'must not be NULL');
    END IF;
    IF jobs_cancel.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_cancel.error IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'error', 'must not be NULL');
    END IF;

    UPDATE jobs j
    SET state = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL,
        lease_role = NULL,
        last_error = left(jobs_cancel.error, 10000),
        errors = _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                  'error', left(jobs_cancel.error, 10000),
                                                                  'worker', j.lease_holder))
    WHERE j.id = jobs_cancel.id
      AND j.state = 'running'
      AND j.attempts = jobs_cancel.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.queue, j.claim_id INTO v_queue, v_claim;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_cancel(bigint, integer, text) IS
    'skiplock: running -> cancelled when held at this attempt (fenced), recording error; for a handler giving up on its job.';
