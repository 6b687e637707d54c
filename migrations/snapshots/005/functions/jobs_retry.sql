-- jobs_retry: gives a dead or cancelled job another run, now.
--
-- Promises: a dead or cancelled job goes back to queued with run_at = now() and true is
--           returned; any other state, or an unknown id, returns false. attempts keeps
--           counting (the next claim gets a fencing token never used before), and
--           max_attempts is raised to attempts + 1 when needed so the job gets at least one
--           more attempt. last_error and the errors history are kept. NOTIFYs jobs_ready at
--           commit.
-- Locks:    the job's row, until the caller's transaction ends.
-- States:   dead -> queued, cancelled -> queued; finished_at cleared.
-- Time:     now() (transaction start).
-- Errors:   22023 when id is NULL; 23505 (unique_violation) when the job has a unique_key
--           that another live (queued or running) job of its queue holds now.
CREATE OR REPLACE FUNCTION jobs_retry(id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
BEGIN
    IF jobs_retry.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_retry', 'id', 'must not be NULL');
    END IF;

    UPDATE jobs j
    SET state = 'queued',
        run_at = now(),
        max_attempts = greatest(j.max_attempts, j.attempts + 1),
        finished_at = NULL
    WHERE j.id = jobs_retry.id
      AND j.state IN ('dead', 'cancelled')
    RETURNING j.queue INTO v_queue;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    PERFORM pg_notify('jobs_ready', v_queue);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_retry(bigint) IS
    'skiplock: dead or cancelled -> queued now, with at least one more attempt; attempts keep counting.';
