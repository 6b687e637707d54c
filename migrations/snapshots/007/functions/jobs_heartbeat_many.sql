-- jobs_heartbeat_many: the batch form of jobs_heartbeat; returns the jobs still held, and
-- whether each lease was extended.
--
-- Promises: for each (ids[i], attempts[i]) the fenced rule of jobs_heartbeat, except that it
--           never waits for a row lock another session holds: such a job is returned with
--           extended = false when it is still running at that attempt, and its lease is left
--           as it was (call again later). One stuck row lock therefore cannot hold up the
--           heartbeats of a worker's other jobs. A job missing from the result is no longer
--           the caller's, and a job another login holds is missing too, locked or not. A
--           duplicate pair counts once.
-- Locks:    the extended rows, in id order, until the caller's transaction ends.
-- States:   none.
-- Time:     now() (transaction start).
-- Errors:   22023 as for jobs_complete_many, and when lease is NULL, <= 0 or longer than 100 years.
CREATE OR REPLACE FUNCTION jobs_heartbeat_many(ids bigint[], attempts integer[], lease interval DEFAULT '5 minutes')
RETURNS TABLE (id bigint, extended boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_extended bigint[];
    v_id bigint;
    v_attempt integer;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
    v_claims bigint[];
    v_claim  record;
BEGIN
    PERFORM _jobs_check_fence_arrays('jobs_heartbeat_many', jobs_heartbeat_many.ids, jobs_heartbeat_many.attempts);
    IF jobs_heartbeat_many.lease IS NULL OR jobs_heartbeat_many.lease <= interval '0' OR jobs_heartbeat_many.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_heartbeat_many', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    -- Each pair is looked up through jobs_pkey (the LATERAL subquery, which its row lock
    -- keeps from being flattened into a join), in id order, so the cost follows the batch,
    -- not the number of running jobs, whatever plan the statistics suggest. SKIP LOCKED:
    -- a row another session has locked is left for the loop below.
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
              AND (j.lease_role IS NULL OR j.lease_role = v_login)
            FOR NO KEY UPDATE SKIP LOCKED
        ) AS l
    ), moved AS (
        UPDATE jobs j
        SET lease_expires_at = now() + jobs_heartbeat_many.lease
        WHERE j.id = ANY (ARRAY(SELECT held.id FROM held))
        RETURNING j.id, j.claim_id
    )
    SELECT coalesce(array_agg(moved.id), '{}'), coalesce(array_agg(DISTINCT moved.claim_id), '{}')
    INTO v_extended, v_claims
    FROM moved;

    -- A shorter lease than a claim's: jobs_requeue_expired must look at the claim by then. One
    -- claim at a time, in claim_id order (the order completions lock them in).
    FOR v_claim IN
        SELECT c.claim_id FROM jobs_claims c
        WHERE c.claim_id = ANY (v_claims) AND c.expires_at > now() + jobs_heartbeat_many.lease
        ORDER BY c.claim_id
    LOOP
        UPDATE jobs_claims c SET expires_at = now() + jobs_heartbeat_many.lease
        WHERE c.claim_id = v_claim.claim_id AND c.expires_at > now() + jobs_heartbeat_many.lease;
    END LOOP;

    RETURN QUERY SELECT e.id, true FROM unnest(v_extended) AS e(id);

    -- The pairs not extended: still held (by the snapshot's reading) when another session
    -- has the row locked, gone otherwise. Usually none, and one primary-key probe each.
    FOR v_id, v_attempt IN
        SELECT DISTINCT t.id, t.attempt
        FROM unnest(jobs_heartbeat_many.ids, jobs_heartbeat_many.attempts) AS t(id, attempt)
        WHERE t.id <> ALL (v_extended)
    LOOP
        IF EXISTS (SELECT FROM jobs j
                   WHERE j.id = v_id AND j.attempts = v_attempt AND j.state = 'running'
                     AND (j.lease_role IS NULL OR j.lease_role = v_login)) THEN
            id := v_id;
            extended := false;
            RETURN NEXT;
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION jobs_heartbeat_many(bigint[], integer[], interval) IS
    'skiplock: jobs_heartbeat for many (id, attempt) pairs without waiting for row locks; returns (id, extended) for the jobs still held.';
