-- jobs_heartbeat_many: the batch form of jobs_heartbeat; returns the ids still held.
--
-- Promises: for each (ids[i], attempts[i]) the fenced rule of jobs_heartbeat; the result
--           lists the ids whose lease was extended. An id missing from the result is no
--           longer the caller's.
-- Locks:    the extended rows, in id order, until the caller's transaction ends.
-- States:   none.
-- Time:     now() (transaction start).
-- Errors:   22023 as for jobs_complete_many, and when lease is NULL, <= 0 or longer than 100 years.
CREATE OR REPLACE FUNCTION jobs_heartbeat_many(ids bigint[], attempts integer[], lease interval DEFAULT '5 minutes')
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _jobs_check_fence_arrays('jobs_heartbeat_many', jobs_heartbeat_many.ids, jobs_heartbeat_many.attempts);
    IF jobs_heartbeat_many.lease IS NULL OR jobs_heartbeat_many.lease <= interval '0' OR jobs_heartbeat_many.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_heartbeat_many', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    RETURN QUERY
    -- Each pair is looked up through jobs_pkey (the LATERAL subquery, which FOR UPDATE
    -- keeps from being flattened into a join), in id order, so the cost follows the batch,
    -- not the number of running jobs, whatever plan the statistics suggest.
    WITH held AS (
        SELECT l.id
        FROM (SELECT t.id, t.attempt
              FROM unnest(jobs_heartbeat_many.ids, jobs_heartbeat_many.attempts) AS t(id, attempt)
              ORDER BY t.id) AS t
        CROSS JOIN LATERAL (
            SELECT j.id
            FROM jobs j
            WHERE j.id = t.id
              AND j.attempts = t.attempt
              AND j.state = 'running'
            FOR UPDATE
        ) AS l
    )
    UPDATE jobs j
    SET lease_expires_at = now() + jobs_heartbeat_many.lease
    WHERE j.id = ANY (ARRAY(SELECT held.id FROM held))
    RETURNING j.id;
END;
$$;

COMMENT ON FUNCTION jobs_heartbeat_many(bigint[], integer[], interval) IS
    'skiplock: jobs_heartbeat for many (id, attempt) pairs; returns the ids still held.';
