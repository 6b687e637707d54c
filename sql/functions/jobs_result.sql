-- jobs_result: what became of a job, for a caller waiting for it.
--
-- Promises: one row with the job's state, its result (jobs_complete's; NULL for none or
--           while unfinished) and last_error; no rows for an unknown (or pruned) id. The job
--           has finished when state is done, dead or cancelled. To wait without polling hard,
--           LISTEN jobs_finished before the first call, enqueue the job with notify_finished,
--           and call again on each notification whose payload is the id (docs/workflows.md);
--           the clients' wait calls do that, with a poll as safety net.
-- Locks:    none (a plain read). States: none.
-- Errors:   22023 when id is NULL.
CREATE OR REPLACE FUNCTION jobs_result(id bigint)
RETURNS TABLE (
    state      jobs_state,
    result     jsonb,
    last_error text
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_result.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_result', 'id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.state, j.result, j.last_error
    FROM jobs j
    WHERE j.id = jobs_result.id;
END;
$$;

COMMENT ON FUNCTION jobs_result(bigint) IS
    'skiplock: a job''s state, result and last_error; no rows for an unknown id.';
