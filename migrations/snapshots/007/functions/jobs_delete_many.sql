-- jobs_delete_many: deletes finished jobs matching the filters, at most max_jobs per call.
--
-- Promises: deletes the jobs that match every non-NULL filter (ids: any of these ids; queue;
--           kind; states, a subset of done, dead and cancelled) and returns how many. Never
--           deletes a queued or running job: states may not name them. To delete everything
--           that matches, call it until it returns 0 (docs/sql-api.md).
-- Safe while workers run: rows are taken FOR UPDATE SKIP LOCKED, so the call never waits
--           for a row lock and cannot deadlock with claims, completions, jobs_maintain or
--           another bulk action; a locked row is left for the next call.
-- Cost:     dead and cancelled jobs are read through jobs_dead_cancelled, ids through
--           jobs_pkey; done jobs (no index of their own, to keep completions cheap) by a scan
--           that stops after max_jobs matches. Planned for each call's arguments.
-- Locks:    the deleted rows, until the caller's transaction ends.
-- States:   removes done/dead/cancelled rows.
-- Errors:   22023 when states is NULL, empty, holds NULL or a state other than done, dead and
--           cancelled, or max_jobs is NULL or < 1; 23503 when a row of another table still
--           references a job through a foreign key without ON DELETE.
CREATE OR REPLACE FUNCTION jobs_delete_many(
    ids      bigint[]     DEFAULT NULL,
    queue    text         DEFAULT NULL,
    kind     text         DEFAULT NULL,
    states   jobs_state[] DEFAULT '{done, dead, cancelled}',
    max_jobs integer      DEFAULT 10000
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    PERFORM _jobs_check_bulk_args('jobs_delete_many', jobs_delete_many.states, '{done, dead, cancelled}',
                                  jobs_delete_many.max_jobs);

    IF jobs_delete_many.ids IS NULL AND NOT 'done' = ANY (jobs_delete_many.states) THEN
        -- Dead and cancelled jobs only: read from jobs_dead_cancelled, never walking the
        -- done ones.
        WITH doomed AS (
            SELECT l.id
            FROM jobs_dead_cancelled d
            -- One primary-key probe per listed job (the row lock keeps the subquery a probe).
            CROSS JOIN LATERAL (
                SELECT j.id
                FROM jobs j
                WHERE j.id = d.id
                  AND j.state IN ('dead', 'cancelled')
                  AND j.state = ANY (jobs_delete_many.states)
                  AND (jobs_delete_many.kind IS NULL OR j.kind = jobs_delete_many.kind)
                FOR UPDATE SKIP LOCKED
            ) AS l
            WHERE d.state = ANY (jobs_delete_many.states)
              AND (jobs_delete_many.queue IS NULL OR d.queue = jobs_delete_many.queue)
            LIMIT jobs_delete_many.max_jobs
        )
        DELETE FROM jobs j
        WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
    ELSE
        WITH doomed AS (
            SELECT j.id
            FROM jobs j
            WHERE j.state IN ('done', 'dead', 'cancelled')
              AND j.state = ANY (jobs_delete_many.states)
              AND (jobs_delete_many.ids IS NULL OR j.id = ANY (jobs_delete_many.ids))
              AND (jobs_delete_many.queue IS NULL OR j.queue = jobs_delete_many.queue)
              AND (jobs_delete_many.kind IS NULL OR j.kind = jobs_delete_many.kind)
            LIMIT jobs_delete_many.max_jobs
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM jobs j
        -- Through jobs_pkey; a join with doomed may be planned as a scan of the whole table.
        WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
    END IF;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_delete_many(bigint[], text, text, jobs_state[], integer) IS
    'skiplock: deletes up to max_jobs finished jobs matching the filters (default: done, dead, cancelled); skips locked rows; returns the count.';
