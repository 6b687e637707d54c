-- jobs_set_rate_limit (proxy): sets a queue's rate limit, on the queue's shard.
--
-- Promises: the shard's jobs_set_rate_limit with the same arguments, run on the queue's shard
--           (_jobs_proxy_queue_shard; pins the queue to its shard (jobs_proxy_queues) when it has no shard yet), in a transaction of its own there.
--           Answers what the shard's function answers (sql/functions/jobs_set_rate_limit.sql).
-- Locks:    on the shard, as the shard's function; on the proxy, a new jobs_proxy_queues
--           row until the caller's transaction ends.
-- States:   as the shard's function.
-- Errors:   the shard's errors; when the shard is down, PL/Proxy's connection error naming
--           the shard's partition and connection string.
CREATE OR REPLACE FUNCTION jobs_set_rate_limit(queue text, max_starts integer, per interval,
                                               per_key boolean DEFAULT false)
RETURNS void
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_queue_shard('jobs_set_rate_limit', queue, true);
$$;
