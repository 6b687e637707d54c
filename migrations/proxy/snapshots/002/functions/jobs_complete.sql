-- jobs_complete (proxy): marks a job done if the caller still holds it, on the shard the id names.
--
-- Promises: the shard's jobs_complete with the same arguments, run on shard id % 1024
--           (_jobs_proxy_id_shard), in a transaction of its own there: it commits on the
--           shard whether or not the caller's transaction on the proxy commits. Answers what
--           the shard's function answers (see sql/functions/jobs_complete.sql). result is
--           stored on the job's shard, where its children (which live there too) get it.
-- Locks:    on the shard, as the shard's function, until that call ends; nothing on the proxy.
-- States:   as the shard's function.
-- Errors:   22023 naming id when its shard is not configured; the shard's errors; when the
--           shard is down, PL/Proxy's connection error naming the shard's partition and
--           connection string (calls for the other shards go on).
CREATE OR REPLACE FUNCTION jobs_complete(id bigint, attempt integer, result jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_id_shard('jobs_complete', 'id', id);
$$;
