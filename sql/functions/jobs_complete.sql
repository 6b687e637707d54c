-- jobs_complete: marks a job done, if the caller still holds it.
--
-- Promises: fenced. Returns true and moves the job to done only when it is running at
--           exactly this attempt and its lease was taken by the caller's login (lease_role
--           = session_user; a NULL lease_role, a lease taken before the login was recorded,
--           matches any login). Otherwise (unknown id, already finished, cancelled, lease
--           expired and requeued, claimed again by another worker at a higher attempt,
--           held by another login) returns false and changes nothing: another login's
--           call answers as a stale one does, not with an error. The attempt fences out
--           stale holders; the login separates worker logins from each other, not the
--           processes sharing one login, which are one trust domain. A worker whose lease
--           expired can still complete while nobody has taken the job over. When the job's
--           queue has a concurrency limit or ordered keys (jobs_queues), NOTIFYs jobs_ready
--           with the queue name at commit: a slot came back (or the key's next job may run),
--           and workers waiting for one claim at once.
--           With jobs_settings.done_retention 0 (and no foreign key to jobs that would
--           refuse it, see _jobs_completion_deletes) the job is deleted instead of kept as
--           done: it is then unknown, so a second completion, a stale caller's, jobs_get
--           and jobs_list find nothing, as after jobs_maintain pruned it (a job others wait
--           for, with children or notify_finished, and a workflow step, are kept as done: a
--           workflow's steps are pruned together).
--           result: stored in jobs.result (jobs_get, jobs_result, and the children's
--           jobs_claimed.parent_results); NULL for none. When the job has children, they
--           are released (or their count lowered) in the same transaction, and with
--           notify_finished it NOTIFYs jobs_finished (see _jobs_finished).
-- Locks:    the job's row, until the caller's transaction ends; its children's rows
--           (_jobs_finished).
-- States:   running -> done; sets finished_at = now(), clears lease_expires_at and
--           lease_role. With
--           done_retention 0: running -> deleted.
-- Time:     now() (transaction start).
-- Errors:   22023 when id or attempt is NULL, or result is larger than 1 MB (as text).
CREATE OR REPLACE FUNCTION jobs_complete(id bigint, attempt integer, result jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
    v_claim bigint;
    v_waited boolean;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_complete.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_complete', 'id', 'must not be NULL');
    END IF;
    IF jobs_complete.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_complete', 'attempt', 'must not be NULL');
    END IF;
    IF octet_length(jobs_complete.result::text) > 1048576 THEN
        PERFORM _jobs_invalid('jobs_complete', 'result', 'must be at most 1 MB (as JSON text)');
    END IF;

    IF _jobs_completion_deletes() THEN
        -- A done row nobody keeps: a delete inserts no index entry (an update to done
        -- inserts one into jobs_pkey) and leaves one dead row version instead of two.
        DELETE FROM jobs j
        WHERE j.id = jobs_complete.id
          AND j.state = 'running'
          AND j.attempts = jobs_complete.attempt
          AND (j.lease_role IS NULL OR j.lease_role = v_login)
          -- A job others wait for is kept (below).
          AND j.has_children IS NULL AND j.notify_finished IS NULL AND j.workflow_id IS NULL
        RETURNING j.queue, j.claim_id INTO v_queue, v_claim;
    END IF;
    IF v_queue IS NULL THEN
        UPDATE jobs j
        SET state = 'done',
            finished_at = now(),
            lease_expires_at = NULL,
            lease_role = NULL,
            result = jobs_complete.result
        WHERE j.id = jobs_complete.id
          AND j.state = 'running'
          AND j.attempts = jobs_complete.attempt
          AND (j.lease_role IS NULL OR j.lease_role = v_login)
        RETURNING j.queue, j.claim_id, j.has_children OR j.notify_finished INTO v_queue, v_claim, v_waited;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        IF v_waited THEN
            PERFORM _jobs_finished(ARRAY[jobs_complete.id]);
        END IF;
    END IF;
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_complete(bigint, integer, jsonb) IS
    'skiplock: running -> done, keeping result (deleted with done_retention 0) when the job is still running at this attempt (fenced); returns whether it did.';
