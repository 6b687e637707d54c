-- jobs_workflow: the steps of a workflow, for operators' tools (the CLI's workflow show, the
-- dashboard's workflow page).
--
-- Promises: one row per job with this workflow_id, in id order (parents before children):
--           its id, workflow_step, kind, queue, state, depends_on (its parents' ids),
--           attempts, max_attempts, last_error, progress and finished_at; no rows for an
--           unknown (or pruned) workflow. Never returns payloads or results.
-- Cost:     the steps through jobs_workflow_idx.
-- Locks:    none (a plain read). States: none.
-- Errors:   22023 when workflow_id is NULL.
CREATE OR REPLACE FUNCTION jobs_workflow(workflow_id bigint)
RETURNS TABLE (
    id            bigint,
    workflow_step text,
    kind          text,
    queue         text,
    state         jobs_state,
    depends_on    bigint[],
    attempts      integer,
    max_attempts  integer,
    last_error    text,
    progress      jsonb,
    finished_at   timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
-- The steps through jobs_workflow_idx, whatever a plan cached on a small table would say.
SET enable_seqscan = off
-- With sequential scans off, a plan with a condition that no index serves is
-- costed at 1e10, far above jit_above_cost, so every call would JIT-compile its statements
-- (about 100 ms each time where JIT is available).
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_workflow.workflow_id IS NULL THEN
        PERFORM _jobs_invalid('jobs_workflow', 'workflow_id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.id, j.workflow_step, j.kind, j.queue, j.state, j.depends_on, j.attempts, j.max_attempts,
           j.last_error, j.progress, j.finished_at
    FROM jobs j
    WHERE j.workflow_id = jobs_workflow.workflow_id
    ORDER BY j.id;
END;
$$;

COMMENT ON FUNCTION jobs_workflow(bigint) IS
    'skiplock: the steps of a workflow (no payloads), parents first; no rows for an unknown workflow.';
