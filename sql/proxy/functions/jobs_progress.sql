-- jobs_progress (proxy): records how far a held job has got, on the shard the id names.
--
-- Promises: the shard's jobs_progress with the same arguments, run on shard id % 1024
--           (_jobs_proxy_id_shard), in a transaction of its own there: it commits on the
--           shard whether or not the caller's transaction on the proxy commits. Answers what
--           the shard's function answers (see sql/functions/jobs_progress.sql).
-- Locks:    on the shard, as the shard's function, until that call ends; nothing on the proxy.
-- States:   as the shard's function.
-- Errors:   22023 naming id when its shard is not configured; the shard's errors; when the
--           shard is down, PL/Proxy's connection error naming the shard's partition and
--           connection string (calls for the other shards go on).
CREATE OR REPLACE FUNCTION jobs_progress(id bigint, attempt integer, progress jsonb)
RETURNS boolean
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_id_shard('jobs_progress', 'id', id);
$$;
