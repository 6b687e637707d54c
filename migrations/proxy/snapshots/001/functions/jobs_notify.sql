-- jobs_notify (proxy): wakes the workers of a queue, on the queue's shard.
--
-- Promises: the shard's jobs_notify with the same argument, run on the queue's shard
--           (_jobs_proxy_queue_shard; reads the queue's shard without pinning it), where the
--           queue's workers LISTEN. It commits there in a transaction of its own, so the
--           wake-up goes out at once, not at the caller's commit on the proxy: send it after
--           the enqueues it announces (jobs_enqueue with notify => false) have returned.
-- Locks:    none on the proxy; on the shard, as the shard's function.
-- States:   none of the jobs.
-- Errors:   the shard's errors (22023 naming queue); when the shard is down, PL/Proxy's
--           connection error naming the shard's partition.
CREATE OR REPLACE FUNCTION jobs_notify(queue text)
RETURNS void
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_queue_shard('jobs_notify', queue, false);
$$;
