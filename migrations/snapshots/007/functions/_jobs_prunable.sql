-- _jobs_prunable: whether retention may delete a finished job that others depend on or that
-- is a workflow step.
--
-- Promises: false while a child of the job (has_children) is unfinished: it still reads the
--           job's result when claimed. For a workflow step (workflow_id), false while any step
--           of its workflow is unfinished or finished at or after cutoff: a workflow's steps
--           go together, once its last one is past retention. Callers test
--           workflow_id IS NULL AND has_children IS NULL first, so ordinary jobs never call it.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_prunable(id bigint, workflow_id bigint, has_children boolean, cutoff timestamptz)
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path FROM CURRENT
-- The steps through jobs_workflow_idx, whatever a plan cached on a small table would say.
SET enable_seqscan = off
-- With sequential scans off, a plan with a condition that no index serves is
-- costed at 1e10, far above jit_above_cost, so every call would JIT-compile its statements
-- (about 100 ms each time where JIT is available).
SET jit = off
AS $$
    SELECT (_jobs_prunable.workflow_id IS NULL
            OR NOT EXISTS (SELECT FROM jobs w
                           WHERE w.workflow_id = _jobs_prunable.workflow_id
                             AND (w.state NOT IN ('done', 'dead', 'cancelled')
                                  OR w.finished_at >= _jobs_prunable.cutoff)))
       AND (_jobs_prunable.has_children IS NULL
            OR NOT EXISTS (SELECT FROM jobs_dependencies d
                           JOIN jobs c ON c.id = d.child_id
                           WHERE d.parent_id = _jobs_prunable.id
                             AND c.state NOT IN ('done', 'dead', 'cancelled')));
$$;

COMMENT ON FUNCTION _jobs_prunable(bigint, bigint, boolean, timestamptz) IS
    'skiplock (private): false while a finished job''s children or workflow still need it.';
