-- jobs_cancel_workflow (proxy): cancels every unfinished step of a workflow, on the shard
-- the workflow_id names.
--
-- Promises: the shard's jobs_cancel_workflow with the same arguments, run on shard
--           workflow_id % 1024 (_jobs_proxy_id_shard), in a transaction of its own there: it
--           commits on the shard whether or not the caller's transaction on the proxy
--           commits. Answers what the shard's function answers (see
--           sql/functions/jobs_cancel_workflow.sql). A workflow lives on one shard, that of
--           its first step, whose id is the workflow_id (jobs_enqueue_workflow through the
--           proxy puts every step there).
-- Locks:    on the shard, as the shard's function, until that call ends; nothing on the proxy.
-- States:   as the shard's function.
-- Errors:   22023 naming workflow_id when its shard is not configured; the shard's errors;
--           when the shard is down, PL/Proxy's connection error naming the shard's partition
--           and connection string (calls for the other shards go on).
CREATE OR REPLACE FUNCTION jobs_cancel_workflow(workflow_id bigint)
RETURNS integer
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_id_shard('jobs_cancel_workflow', 'workflow_id', workflow_id);
$$;
