-- jobs_complete_many: the batch form of jobs_complete; returns the ids it completed.
--
-- Promises: for each (ids[i], attempts[i]) the same fenced rule as jobs_complete; pairs whose
--           job is no longer held at that attempt are left alone and missing from the result.
--           A duplicate pair counts once.
-- Locks:    the completed rows, until the caller's transaction ends. Rows are updated in id
--           order, so two overlapping batches cannot deadlock each other.
-- States:   running -> done; sets finished_at = now(), clears lease_expires_at.
-- Time:     now() (transaction start).
-- Errors:   22023 when either array is NULL, their lengths differ, an element is NULL, or
--           there are more than 100000 pairs.
CREATE OR REPLACE FUNCTION jobs_complete_many(ids bigint[], attempts integer[])
RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _jobs_check_fence_arrays('jobs_complete_many', jobs_complete_many.ids, jobs_complete_many.attempts);

    RETURN QUERY
    WITH held AS (
        SELECT j.id
        FROM jobs j
        JOIN unnest(jobs_complete_many.ids, jobs_complete_many.attempts) AS t(id, attempt)
          ON j.id = t.id AND j.attempts = t.attempt
        WHERE j.state = 'running'
        ORDER BY j.id
        FOR UPDATE OF j
    )
    UPDATE jobs j
    SET state = 'done',
        finished_at = now(),
        lease_expires_at = NULL
    FROM held
    WHERE j.id = held.id
    RETURNING j.id;
END;
$$;

COMMENT ON FUNCTION jobs_complete_many(bigint[], integer[]) IS
    'skiplock: jobs_complete for many (id, attempt) pairs; returns the ids completed.';
