-- jobs_get: a job's progress, for producers that want to know what became of their job.
--
-- Promises: one row with the job's state, attempts, max_attempts, run_at (when it is or was
--           due to run next), last_error, created_at, finished_at and meta (jobs_enqueue's,
--           e.g. a trace context), its result (jobs_complete's), its last progress
--           (jobs_progress), workflow_id and depends_on (its parents' ids); no rows for an
--           unknown (or pruned) id. Never returns the
--           payload, queue, kind or lease, so a role that may only call this (jobs_producer)
--           learns nothing about other producers' jobs beyond their progress and meta.
-- Locks:    none (a plain read). States: none.
-- Errors:   22023 when id is NULL.
CREATE OR REPLACE FUNCTION jobs_get(id bigint)
RETURNS TABLE (
    state        jobs_state,
    attempts     integer,
    max_attempts integer,
    run_at       timestamptz,
    last_error   text,
    created_at   timestamptz,
    finished_at  timestamptz,
    meta         jsonb,
    result       jsonb,
    progress     jsonb,
    workflow_id  bigint,
    depends_on   bigint[]
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_get.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_get', 'id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.state, j.attempts, j.max_attempts, j.run_at, j.last_error, j.created_at, j.finished_at, j.meta,
           j.result, j.progress, j.workflow_id, j.depends_on
    FROM jobs j
    WHERE j.id = jobs_get.id;
END;
$$;

COMMENT ON FUNCTION jobs_get(bigint) IS
    'skiplock: a job''s state, attempts, max_attempts, run_at, last_error, created_at, finished_at, meta, result, progress, workflow_id and depends_on (no payload); no rows for an unknown id.';
