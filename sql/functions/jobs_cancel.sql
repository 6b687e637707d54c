-- jobs_cancel: cancels a job that has not finished.
--
-- Promises: a queued or running job becomes cancelled and true is returned; a job in any
--           other state, or an unknown id, returns false and nothing changes. A worker still
--           running a cancelled job is fenced out: its jobs_complete returns false, jobs_fail
--           returns NULL and jobs_heartbeat returns false (the driver then cancels the
--           handler's context).
-- Locks:    the job's row; waits for a claim or completion in progress on it to commit.
-- States:   queued -> cancelled, running -> cancelled; finished_at = now(), lease cleared.
-- Time:     now() (transaction start).
-- Errors:   22023 when id is NULL.
CREATE OR REPLACE FUNCTION jobs_cancel(id bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_cancel.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'id', 'must not be NULL');
    END IF;

    UPDATE jobs j
    SET state = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL
    WHERE j.id = jobs_cancel.id
      AND j.state IN ('queued', 'running');
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION jobs_cancel(bigint) IS
    'skiplock: queued or running -> cancelled; the holder''s later complete returns false and fail returns NULL.';
