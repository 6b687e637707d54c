-- jobs_result (proxy): what became of a job, on the shard the id names.
--
-- Promises: the shard's jobs_result with the same arguments, run on shard id % 1024
--           (_jobs_proxy_id_shard), in a transaction of its own there: it commits on the
--           shard whether or not the caller's transaction on the proxy commits. Answers what
--           the shard's function answers (see sql/functions/jobs_result.sql).
--           The jobs_finished NOTIFY of a job enqueued with notify_finished goes out on its
--           shard: a waiter LISTENing through the proxy hears nothing and finds the end by
--           polling jobs_result (the clients' wait does both).
-- Locks:    on the shard, as the shard's function, until that call ends; nothing on the proxy.
-- States:   as the shard's function.
-- Errors:   22023 naming id when its shard is not configured; the shard's errors; when the
--           shard is down, PL/Proxy's connection error naming the shard's partition and
--           connection string (calls for the other shards go on).
CREATE OR REPLACE FUNCTION jobs_result(id bigint)
RETURNS TABLE (
    state      jobs_state,
    result     jsonb,
    last_error text
)
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_id_shard('jobs_result', 'id', id);
$$;
