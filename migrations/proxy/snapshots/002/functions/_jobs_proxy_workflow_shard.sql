-- _jobs_proxy_workflow_shard: the shard a workflow goes to (the RUN ON of
-- jobs_enqueue_workflow).
--
-- Promises: a workflow lives on one shard (its steps depend on each other, and dependencies
--           are rows of one shard): the shard of the queue of steps' first element, as an
--           enqueue to that queue would go (its jobs_proxy_queues row, else hashtext(queue)
--           over the shard count). Every step's queue must live there too, since jobs_claim
--           finds a queue's jobs on the queue's shard only: the queues not yet pinned are
--           pinned to it, in name order (so two workflows pinning the same new queues cannot
--           deadlock). A step's queue is read as the shard's function reads it
--           (steps[i] ->> 'queue', "default" when absent). steps that are not a non-empty
--           array whose first element is an object go to shard 0, whose function raises the
--           usual 22023 naming steps.
-- Locks:    the new jobs_proxy_queues rows, until the caller's transaction ends.
-- States:   none of the jobs.
-- Errors:   22023 naming steps when a step's queue is pinned to another shard than the
--           first step's queue; 22023 naming queue when the proxy has no shards.
CREATE OR REPLACE FUNCTION _jobs_proxy_workflow_shard(func text, steps jsonb)
RETURNS integer
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_first text;
    v_queue text;
    v_shard integer;
    v_on integer;
BEGIN
    IF jsonb_typeof(_jobs_proxy_workflow_shard.steps) IS DISTINCT FROM 'array'
       OR jsonb_typeof(_jobs_proxy_workflow_shard.steps -> 0) IS DISTINCT FROM 'object' THEN
        RETURN 0;
    END IF;
    v_first := coalesce(_jobs_proxy_workflow_shard.steps -> 0 ->> 'queue', 'default');
    v_shard := _jobs_proxy_queue_shard(_jobs_proxy_workflow_shard.func, v_first, false);
    FOR v_queue IN
        SELECT DISTINCT coalesce(e ->> 'queue', 'default')
        FROM jsonb_array_elements(_jobs_proxy_workflow_shard.steps) AS e
        WHERE jsonb_typeof(e) = 'object'
        ORDER BY 1
    LOOP
        v_on := _jobs_proxy_queue_pin(_jobs_proxy_workflow_shard.func, v_queue, v_shard);
        IF v_on <> v_shard THEN
            PERFORM _jobs_invalid(_jobs_proxy_workflow_shard.func, 'steps',
                format('use queue %s, which lives on shard %s, and queue %s, which lives on shard %s (jobs_proxy_queues): a workflow lives on one shard, so all its steps'' queues must live there',
                       quote_literal(v_first), v_shard, quote_literal(v_queue), v_on));
        END IF;
    END LOOP;
    RETURN v_shard;
END;
$$;

COMMENT ON FUNCTION _jobs_proxy_workflow_shard(text, jsonb) IS
    'skiplock proxy (private): the shard of a workflow (its first step''s queue''s), pinning its steps'' queues there.';
