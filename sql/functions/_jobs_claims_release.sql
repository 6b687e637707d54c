-- _jobs_claims_release: the bookkeeping of jobs that left running.
--
-- Promises: given the claim_id of each job the caller's transaction has just moved out of
--           running (one element per job, by any path: completion, failure, snooze, cancel,
--           expired lease), lowers the running count of those jobs_claims rows and deletes
--           each row whose count reaches 0. A claim's slots in a limited queue are free
--           for the next claim once this commits, with the job's own move.
-- Locks:    the jobs_claims rows, one at a time in claim_id order, until the caller's
--           transaction ends (always after the job rows: every caller locks the jobs first,
--           so two callers cannot wait on each other in opposite orders). Completions of
--           jobs of one claim in two open transactions take turns here.
-- States:   none of jobs.
CREATE OR REPLACE FUNCTION _jobs_claims_release(claim_ids bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_claim   record;
    v_running integer;
BEGIN
    FOR v_claim IN
        SELECT u.claim_id, count(*)::integer AS n
        FROM unnest(_jobs_claims_release.claim_ids) AS u(claim_id)
        WHERE u.claim_id IS NOT NULL
        GROUP BY u.claim_id
        ORDER BY u.claim_id
    LOOP
        UPDATE jobs_claims c
        SET running = c.running - v_claim.n
        WHERE c.claim_id = v_claim.claim_id
        RETURNING c.running INTO v_running;
        IF v_running <= 0 THEN
            DELETE FROM jobs_claims c WHERE c.claim_id = v_claim.claim_id;
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION _jobs_claims_release(bigint[]) IS
    'skiplock (private): lowers the running counts of jobs_claims rows for jobs that left running, deleting rows that reach 0.';
