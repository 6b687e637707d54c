-- jobs_progress: records how far a running job has got, for people watching it.
--
-- Promises: fenced like jobs_complete: only when the job is running at exactly this attempt
--           under a lease the caller's login took, sets progress (any JSON: a number, an
--           object such as {"done": 40, "of": 100}; NULL clears it) and returns true;
--           otherwise returns false and changes nothing. jobs_get, jobs_list, the CLI and the
--           dashboard show it; it stays after the job finishes.
-- Locks:    the job's row, until the caller's transaction ends. States: none.
-- Errors:   22023 when id or attempt is NULL, or progress is larger than 1 MB (as text).
CREATE OR REPLACE FUNCTION jobs_progress(id bigint, attempt integer, progress jsonb)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_progress.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_progress', 'id', 'must not be NULL');
    END IF;
    IF jobs_progress.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_progress', 'attempt', 'must not be NULL');
    END IF;
    IF octet_length(jobs_progress.progress::text) > 1048576 THEN
        PERFORM _jobs_invalid('jobs_progress', 'progress', 'must be at most 1 MB (as JSON text)');
    END IF;

    UPDATE jobs j
    SET progress = jobs_progress.progress
    WHERE j.id = jobs_progress.id
      AND j.state = 'running'
      AND j.attempts = jobs_progress.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login);
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION jobs_progress(bigint, integer, jsonb) IS
    'skiplock: records a running job''s progress when the caller still holds it (fenced); returns whether it did.';
