-- _jobs_proxy_maintain_on: the shard's jobs_maintain, on one shard.
--
-- Promises: runs the shard's jobs_maintain on shard `shard` in a transaction of its own there and
--           returns its result.
-- Locks:    as the shard's function. States: as the shard's function.
-- Errors:   22023 naming shard when it is not configured; the shard's errors.
CREATE OR REPLACE FUNCTION _jobs_proxy_maintain_on(shard integer, max_jobs integer)
RETURNS jobs_maintenance
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_check_shard('jobs_maintain', shard);
    SELECT * FROM jobs_maintain(max_jobs);
$$;

COMMENT ON FUNCTION _jobs_proxy_maintain_on(integer, integer) IS
    'skiplock proxy (private): jobs_maintain on one shard.';
