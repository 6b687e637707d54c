-- jobs_inspect: one job's whole row, for operators (skiplock show, the dashboard's job page).
--
-- Promises: the job's row of the jobs table as it is: payload, errors (the history of every
--           failed attempt: attempt, at, error, worker), lease_holder and lease_expires_at,
--           unique_key, concurrency_key and every timestamp; no rows for an unknown (or pruned)
--           id. jobs_admin has no privilege on the table itself, so this is how it reads one
--           job in full; producers have jobs_get, which shows progress only.
-- Locks:    none (a plain read). States: none.
-- Errors:   22023 when id is NULL.
CREATE OR REPLACE FUNCTION jobs_inspect(id bigint)
RETURNS SETOF jobs
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_inspect.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_inspect', 'id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.*
    FROM jobs j
    WHERE j.id = jobs_inspect.id;
END;
$$;

COMMENT ON FUNCTION jobs_inspect(bigint) IS
    'skiplock: one job''s whole row (payload, error history, lease, timestamps), for operators; no rows for an unknown id.';
