-- jobs_set_concurrency (proxy): sets a queue's concurrency limits, fair sharing and ordered keys,
-- on the queue's shard.
--
-- Promises: the shard's jobs_set_concurrency with the same arguments, run on the queue's shard
--           (_jobs_proxy_queue_shard; pins the queue to its shard (jobs_proxy_queues) when it has no shard yet), in a transaction of its own there.
--           Answers what the shard's function answers (sql/functions/jobs_set_concurrency.sql).
-- Locks:    on the shard, as the shard's function; on the proxy, a new jobs_proxy_queues
--           row until the caller's transaction ends.
-- States:   as the shard's function.
-- Errors:   the shard's errors; when the shard is down, PL/Proxy's connection error naming
--           the shard's partition and connection string.
CREATE OR REPLACE FUNCTION jobs_set_concurrency(queue text, max_running integer, per_key integer DEFAULT NULL,
                                                fair boolean DEFAULT NULL, ordered boolean DEFAULT NULL)
RETURNS void
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_queue_shard('jobs_set_concurrency', queue, true);
$$;
