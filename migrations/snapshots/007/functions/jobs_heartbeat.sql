-- jobs_heartbeat: extends the lease of a job the caller still holds.
--
-- Promises: fenced like jobs_complete. When the job is running at exactly this attempt
--           under a lease the caller's login took, sets lease_expires_at = now() + lease and returns true; otherwise returns false
--           and changes nothing. false means the job is no longer the caller's: it should
--           stop working on it (another worker may already be running it).
-- Locks:    the job's row, until the caller's transaction ends.
-- States:   none (running stays running).
-- Time:     now() (transaction start): call it in autocommit, not from a long transaction.
-- Errors:   22023 when id or attempt is NULL, or lease is NULL, <= 0 or longer than 100 years.
CREATE OR REPLACE FUNCTION jobs_heartbeat(id bigint, attempt integer, lease interval DEFAULT '5 minutes')
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
    v_claim bigint;
    v_lease timestamptz;
BEGIN
    IF jobs_heartbeat.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_heartbeat', 'id', 'must not be NULL');
    END IF;
    IF jobs_heartbeat.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_heartbeat', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_heartbeat.lease IS NULL OR jobs_heartbeat.lease <= interval '0' OR jobs_heartbeat.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_heartbeat', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    UPDATE jobs j
    SET lease_expires_at = now() + jobs_heartbeat.lease
    WHERE j.id = jobs_heartbeat.id
      AND j.state = 'running'
      AND j.attempts = jobs_heartbeat.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.claim_id, j.lease_expires_at INTO v_claim, v_lease;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- A shorter lease than the claim's: jobs_requeue_expired must look at the claim by then.
    UPDATE jobs_claims c SET expires_at = v_lease WHERE c.claim_id = v_claim AND c.expires_at > v_lease;
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_heartbeat(bigint, integer, interval) IS
    'skiplock: extends the lease of a running job held at this attempt (fenced); false means the job is no longer yours.';
