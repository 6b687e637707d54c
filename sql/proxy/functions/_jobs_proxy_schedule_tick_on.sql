-- _jobs_proxy_schedule_tick_on: the shard's jobs_schedule_tick, on one shard.
--
-- Promises: runs the shard's jobs_schedule_tick on shard `shard` in a transaction of its own there and
--           returns its result.
-- Locks:    as the shard's function. States: as the shard's function.
-- Errors:   22023 naming shard when it is not configured; the shard's errors.
CREATE OR REPLACE FUNCTION _jobs_proxy_schedule_tick_on(shard integer)
RETURNS integer
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_check_shard('jobs_schedule_tick', shard);
    SELECT jobs_schedule_tick();
$$;

COMMENT ON FUNCTION _jobs_proxy_schedule_tick_on(integer) IS
    'skiplock proxy (private): jobs_schedule_tick on one shard.';
