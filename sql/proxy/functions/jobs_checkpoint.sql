-- jobs_checkpoint (proxy): saves the value of a finished step of a held job, on the shard the
-- id names.
--
-- Promises: the shard's jobs_checkpoint with the same arguments, run on shard id % 1024
--           (_jobs_proxy_id_shard), in a transaction of its own there: it commits on the
--           shard whether or not the caller's transaction on the proxy commits. Answers what
--           the shard's function answers (see sql/functions/jobs_checkpoint.sql).
-- Locks:    on the shard, as the shard's function, until that call ends; nothing on the proxy.
-- States:   as the shard's function.
-- Errors:   22023 naming id when its shard is not configured; the shard's errors; when the
--           shard is down, PL/Proxy's connection error naming the shard's partition and
--           connection string (calls for the other shards go on).
CREATE OR REPLACE FUNCTION jobs_checkpoint(id bigint, attempt integer, step text, value jsonb)
RETURNS boolean
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_id_shard('jobs_checkpoint', 'id', id);
$$;
