-- _jobs_proxy_queues_on: the queues that have jobs on one shard (jobs_proxy_set_shards pins
-- them before it adds shards).
--
-- Promises: every queue with at least one job, in any state, on the shard, once (from the
--           shard's jobs_stats).
-- Locks:    none. States: none.
-- Errors:   22023 naming shard when it is not configured; PL/Proxy's connection error naming
--           the shard when it is down.
CREATE OR REPLACE FUNCTION _jobs_proxy_queues_on(shard integer)
RETURNS SETOF text
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_check_shard('jobs_proxy_set_shards', shard);
    SELECT DISTINCT s.queue FROM jobs_stats() AS s;
$$;

COMMENT ON FUNCTION _jobs_proxy_queues_on(integer) IS
    'skiplock proxy (private): the queues that have jobs on one shard.';
