-- jobs_retry: gives a dead or cancelled job another run, now.
--
-- Promises: a dead or cancelled job goes back to queued with run_at = now() and true is
--           returned; any other state, or an unknown id, returns false. attempts keeps
--           counting (the next claim gets a fencing token never used before), and
--           max_attempts is raised to attempts + 1 when needed so the job gets at least one
--           more attempt. last_error and the errors history are kept. NOTIFYs jobs_ready at
--           commit. A job still waiting for a parent (pending_parents > 0: it was cancelled
--           while waiting) goes back to waiting instead. The children its end had cancelled
--           (cancelled_by) come back to waiting, and theirs, down the graph (_jobs_revive).
--           Keeps jobs_set_shard's promise: on a shard (jobs_shard() not NULL) a job is
--           queued again only if its id carries the shard number (id % 1024 = shard), so a
--           router sends its completion here. A job created before jobs_set_shard (or before
--           the shard number changed), whose id names another shard, is refused (55000) and
--           stays as it is: enqueue its payload again to run it.
-- Locks:    the job's row, until the caller's transaction ends.
-- States:   dead or cancelled -> queued (or waiting); finished_at cleared; descendants
--           cancelled by its end: cancelled -> waiting.
-- Time:     now() (transaction start).
-- Errors:   22023 when id is NULL; 23505 (unique_violation) when the job has a unique_key
--           that another live (waiting, queued or running) job of its queue holds now, or
--           another finished job's unique_for period (a period held by this job's own end
--           gives way: see _jobs_unique_key_sync); 55000
--           (object_not_in_prerequisite_state) when the dead or cancelled job's id does not
--           carry this shard's number, or its attempts are at 2147483647 (the integer limit:
--           no attempt number is left for it), or it waits for a parent that ended dead or
--           cancelled (it would wait forever: retry the parent, which brings it back).
CREATE OR REPLACE FUNCTION jobs_retry(id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_queue    text;
    v_shard    integer;
    v_attempts integer;
    v_state    jobs_state;
    v_children boolean;
    v_parent   bigint;
BEGIN
    IF jobs_retry.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_retry', 'id', 'must not be NULL');
    END IF;

    UPDATE jobs j
    -- A job still waiting for a parent goes back to waiting.
    SET state = CASE WHEN j.pending_parents > 0 THEN 'waiting' ELSE 'queued' END::jobs_state,
        run_at = now(),
        max_attempts = greatest(j.max_attempts, j.attempts + 1),
        finished_at = NULL,
        cancelled_by = NULL
    WHERE j.id = jobs_retry.id
      AND j.state IN ('dead', 'cancelled')
      -- Read in this statement, whose snapshot is taken once it holds its lock on jobs: a
      -- jobs_set_shard committing meanwhile (it holds jobs exclusively) is seen.
      AND j.id % 1024 = coalesce((SELECT s.shard FROM jobs_settings s), j.id % 1024)
      -- attempts + 1 must fit in an integer (and be a fencing token never handed out).
      AND j.attempts < 2147483647
      -- Not while a parent it waits for has ended dead or cancelled (refused below).
      AND (coalesce(j.pending_parents, 0) = 0 OR NOT EXISTS (
              SELECT FROM jobs_dependencies pd
              JOIN jobs pj ON pj.id = pd.parent_id
              WHERE pd.child_id = j.id
                AND NOT pd.resolved
                AND pj.state IN ('dead', 'cancelled')))
    RETURNING j.queue, j.state, j.has_children INTO v_queue, v_state, v_children;
    IF NOT FOUND THEN
        -- Why not: only these two refusals raise; any other state or an unknown id is false.
        SELECT j.attempts INTO v_attempts
        FROM jobs j
        WHERE j.id = jobs_retry.id AND j.state IN ('dead', 'cancelled');
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        v_shard := (SELECT s.shard FROM jobs_settings s);
        IF v_shard IS NOT NULL AND jobs_retry.id % 1024 <> v_shard THEN
            RAISE EXCEPTION 'jobs_retry: job % cannot be queued again on shard %: its id names shard %',
                    jobs_retry.id, v_shard, jobs_retry.id % 1024
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'A router would send its completion to another shard. Enqueue its payload again to run it here under a new id.';
        END IF;
        SELECT min(pd.parent_id) INTO v_parent
        FROM jobs_dependencies pd
        JOIN jobs pj ON pj.id = pd.parent_id
        WHERE pd.child_id = jobs_retry.id
          AND NOT pd.resolved
          AND pj.state IN ('dead', 'cancelled');
        IF v_parent IS NOT NULL THEN
            RAISE EXCEPTION 'jobs_retry: job % waits for its parent %, which ended % (it would wait forever)',
                    jobs_retry.id, v_parent, (SELECT pj.state FROM jobs pj WHERE pj.id = v_parent)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Retry the parent: that brings its descendants back.';
        END IF;
        IF v_attempts = 2147483647 THEN
            RAISE EXCEPTION 'jobs_retry: job % has no attempt left: attempts is at its limit, %', jobs_retry.id, v_attempts
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Enqueue its payload again to run it under a new id.';
        END IF;
        RETURN false;
    END IF;

    IF v_children THEN
        PERFORM _jobs_revive(ARRAY[jobs_retry.id]);
    END IF;
    IF v_state = 'queued' THEN
        PERFORM pg_notify('jobs_ready', v_queue);
    END IF;
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_retry(bigint) IS
    'skiplock: dead or cancelled -> queued now, with at least one more attempt; attempts keep counting.';
