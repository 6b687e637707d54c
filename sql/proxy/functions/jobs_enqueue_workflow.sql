-- jobs_enqueue_workflow (proxy): adds a whole graph of jobs (a workflow) on one shard;
-- returns each step's name and job id.
--
-- Promises: the shard's jobs_enqueue_workflow with the same steps, run on the shard of the
--           queue of steps' first element (_jobs_proxy_workflow_shard, which pins it like an
--           enqueue, and pins the other steps' new queues there too): a workflow lives on one
--           shard, where its steps' dependencies are rows, so every id it returns (and its
--           workflow_id) names that shard. All or nothing, as on one server: the shard inserts
--           every step or none, in a transaction of its own there, whatever becomes of the
--           caller's transaction on the proxy.
-- Locks:    as the shard's function; on the proxy, the new queues' jobs_proxy_queues rows.
-- States:   creates queued and waiting jobs on the shard.
-- Errors:   22023 naming steps when a step's queue is pinned to another shard than the first
--           step's queue; the shard's errors; when the shard is down, PL/Proxy's connection
--           error naming the shard's partition and connection string.
CREATE OR REPLACE FUNCTION jobs_enqueue_workflow(steps jsonb)
RETURNS TABLE (name text, id bigint)
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_workflow_shard('jobs_enqueue_workflow', steps);
$$;
