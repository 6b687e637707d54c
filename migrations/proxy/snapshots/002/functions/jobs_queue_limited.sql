-- jobs_queue_limited (proxy): whether claims of a queue are limited, on the queue's shard.
--
-- Promises: the shard's jobs_queue_limited with the same arguments, run on the queue's shard
--           (_jobs_proxy_queue_shard; reads the queue's shard without pinning it), in a transaction of its own there.
--           Answers what the shard's function answers (sql/functions/jobs_queue_limited.sql).
-- Locks:    on the shard, as the shard's function; on the proxy, a new jobs_proxy_queues
--           row until the caller's transaction ends.
-- States:   as the shard's function.
-- Errors:   the shard's errors; when the shard is down, PL/Proxy's connection error naming
--           the shard's partition and connection string.
CREATE OR REPLACE FUNCTION jobs_queue_limited(queue text)
RETURNS boolean
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_queue_shard('jobs_queue_limited', queue, false);
$$;
