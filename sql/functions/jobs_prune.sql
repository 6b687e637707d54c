-- jobs_prune: deletes finished jobs older than a retention period; returns how many.
--
-- Promises: deletes up to max_jobs jobs in done or cancelled (and dead, when include_dead)
--           whose finished_at is before now() - older_than, lowest id first. Never touches
--           queued or running jobs. Call it repeatedly until it returns less than max_jobs
--           to catch up on a large backlog in short transactions. An older_than beyond 1000
--           years is treated as 1000 years (nothing is that old; it avoids overflowing the
--           timestamp range).
-- Cost:     walks the primary key from the oldest id. There is deliberately no index on
--           finished_at: every completion would pay for it, and old ids are the old jobs.
-- Locks:    the deleted rows, until the caller's transaction ends; skips rows locked by
--           others (SKIP LOCKED).
-- States:   removes done/cancelled/dead rows.
-- Time:     now() (transaction start).
-- Errors:   22023 when older_than is NULL or negative, include_dead is NULL, or max_jobs is
--           NULL or < 1.
CREATE OR REPLACE FUNCTION jobs_prune(
    older_than   interval DEFAULT '7 days',
    include_dead boolean  DEFAULT false,
    max_jobs     integer  DEFAULT 10000
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    IF jobs_prune.older_than IS NULL OR jobs_prune.older_than < interval '0' THEN
        PERFORM _jobs_invalid('jobs_prune', 'older_than', 'must be an interval >= 0');
    END IF;
    IF jobs_prune.include_dead IS NULL THEN
        PERFORM _jobs_invalid('jobs_prune', 'include_dead', 'must not be NULL');
    END IF;
    IF jobs_prune.max_jobs IS NULL OR jobs_prune.max_jobs < 1 THEN
        PERFORM _jobs_invalid('jobs_prune', 'max_jobs', 'must be at least 1');
    END IF;

    WITH doomed AS (
        SELECT j.id
        FROM jobs j
        WHERE j.finished_at IS NOT NULL
          -- Capped so that an absurd retention cannot overflow the timestamp range; nothing
          -- finished 1000 years ago, so the cap changes no result.
          AND j.finished_at < now() - least(jobs_prune.older_than, interval '1000 years')
          AND (j.state IN ('done', 'cancelled') OR (jobs_prune.include_dead AND j.state = 'dead'))
          AND ((j.workflow_id IS NULL AND j.has_children IS NULL)
               OR _jobs_prunable(j.id, j.workflow_id, j.has_children,
                                 now() - least(jobs_prune.older_than, interval '1000 years')))
        ORDER BY j.id
        LIMIT jobs_prune.max_jobs
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobs j
    -- Through jobs_pkey; a join with doomed may be planned as a scan of the whole table.
    WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_prune(interval, boolean, integer) IS
    'skiplock: deletes finished (done, cancelled; dead if include_dead) jobs older than older_than, at most max_jobs per call.';
