-- jobs_get (proxy): a job's state, for producers following it, on the shard the id names.
--
-- Promises: the shard's jobs_get with the same arguments, run on shard id % 1024
--           (_jobs_proxy_id_shard), in a transaction of its own there: it commits on the
--           shard whether or not the caller's transaction on the proxy commits. Answers what
--           the shard's function answers (see sql/functions/jobs_get.sql).
-- Locks:    on the shard, as the shard's function, until that call ends; nothing on the proxy.
-- States:   as the shard's function.
-- Errors:   22023 naming id when its shard is not configured; the shard's errors; when the
--           shard is down, PL/Proxy's connection error naming the shard's partition and
--           connection string (calls for the other shards go on).
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
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_id_shard('jobs_get', 'id', id);
$$;
