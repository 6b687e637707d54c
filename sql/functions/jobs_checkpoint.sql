-- jobs_checkpoint: saves the value of a finished step of a running job, for its next attempts.
--
-- Promises: fenced like jobs_complete: only when the job is running at exactly this attempt
--           under a lease the caller's login took, sets checkpoints[step] = value and returns
--           true; otherwise returns false and changes nothing. The checkpoints survive a
--           failure, a lease that expired, a snooze and jobs_retry; each later claim hands
--           them to the handler (jobs_claimed.checkpoints), which skips the steps found there
--           (the clients' step calls). Saving a step again replaces its value.
-- Locks:    the job's row, until the caller's transaction ends. States: none.
-- Errors:   22023 when id, attempt or value is NULL (a step with nothing to keep saves
--           'null'::jsonb), step is NULL, empty or longer than 200 bytes, or value is larger
--           than 1 MB (as text), or the checkpoints would be larger than 16 MB together.
CREATE OR REPLACE FUNCTION jobs_checkpoint(id bigint, attempt integer, step text, value jsonb)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_login regrole := to_regrole(quote_ident(session_user));
    v_size  integer;
BEGIN
    IF jobs_checkpoint.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'id', 'must not be NULL');
    END IF;
    IF jobs_checkpoint.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_checkpoint.step IS NULL OR jobs_checkpoint.step = '' OR octet_length(jobs_checkpoint.step) > 200 THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'step', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_checkpoint.value IS NULL THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'value', 'must not be NULL (use ''null''::jsonb for no value)');
    END IF;
    IF octet_length(jobs_checkpoint.value::text) > 1048576 THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'value', 'must be at most 1 MB (as JSON text)');
    END IF;

    UPDATE jobs j
    SET checkpoints = coalesce(j.checkpoints, '{}') || jsonb_build_object(jobs_checkpoint.step, jobs_checkpoint.value)
    WHERE j.id = jobs_checkpoint.id
      AND j.state = 'running'
      AND j.attempts = jobs_checkpoint.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING octet_length(j.checkpoints::text) INTO v_size;
    IF v_size > 16777216 THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'value', 'would make the job''s checkpoints larger than 16 MB together');
    END IF;
    RETURN v_size IS NOT NULL;
END;
$$;

COMMENT ON FUNCTION jobs_checkpoint(bigint, integer, text, jsonb) IS
    'skiplock: saves a finished step''s value for the job''s later attempts, when the caller still holds the job (fenced); returns whether it did.';
