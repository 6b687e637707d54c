-- jobs_cancel_workflow: cancels every unfinished step of a workflow; returns how many.
--
-- Promises: each waiting, queued or running job with this workflow_id becomes cancelled, as
--           jobs_cancel(id) does it: a running step's holder is fenced out (its later
--           jobs_complete returns false, jobs_fail NULL), and a limited queue gets its slot
--           back. Steps are cancelled in id order (parents first), so no step is released by
--           the cancellation of its parent (on_parent_failure 'run') and then left running.
--           Finished steps keep their state; an unknown workflow_id returns 0.
-- Locks:    the queued steps' jobs_queued rows, then every unfinished step's row in id order,
--           before any change, until the caller's transaction ends: a worker completing a
--           step meanwhile is waited for, never deadlocked with.
-- States:   waiting, queued or running -> cancelled.
-- Time:     now() (transaction start).
-- Errors:   22023 when workflow_id is NULL.
CREATE OR REPLACE FUNCTION jobs_cancel_workflow(workflow_id bigint)
RETURNS integer
LANGUAGE plpgsql
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
DECLARE
    v_id        bigint;
    v_open      bigint[];
    v_cancelled integer;
BEGIN
    IF jobs_cancel_workflow.workflow_id IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel_workflow', 'workflow_id', 'must not be NULL');
    END IF;
    v_open := ARRAY(SELECT j.id FROM jobs j
                    WHERE j.workflow_id = jobs_cancel_workflow.workflow_id
                      AND j.state NOT IN ('done', 'dead', 'cancelled'));
    -- Queued steps leave jobs_queued first (the order claims lock in), then every unfinished
    -- step's row is locked in id order before any is cancelled: a step's cancellation locks
    -- its children (the cascade), and a worker completing another step locks them too, after
    -- its own step, which this call would otherwise wait for while holding them.
    DELETE FROM jobs_queued q
    USING jobs j
    WHERE j.id = ANY (v_open)
      AND j.state = 'queued'
      AND (q.queue, q.priority, q.run_at, q.id) = (j.queue, j.priority, j.run_at, j.id);
    PERFORM 1 FROM jobs j WHERE j.id = ANY (v_open) ORDER BY j.id FOR NO KEY UPDATE;
    -- A step's cancellation also cancels its waiting children, whose own jobs_cancel then
    -- returns false; a step a cancelled parent released (on_parent_failure 'run') is queued
    -- when the loop reaches it.
    FOR v_id IN SELECT u FROM unnest(v_open) AS u ORDER BY u LOOP
        PERFORM jobs_cancel(v_id);
    END LOOP;
    SELECT count(*) INTO v_cancelled FROM jobs j WHERE j.id = ANY (v_open) AND j.state = 'cancelled';
    RETURN v_cancelled;
END;
$$;

COMMENT ON FUNCTION jobs_cancel_workflow(bigint) IS
    'skiplock: cancels every unfinished step of a workflow (fencing running ones); returns how many.';
