-- _jobs_proxy_requeue_expired_on: the shard's jobs_requeue_expired, on one shard.
--
-- Promises: runs the shard's jobs_requeue_expired on shard `shard` in a transaction of its own there and
--           returns its result.
-- Locks:    as the shard's function. States: as the shard's function.
-- Errors:   22023 naming shard when it is not configured; the shard's errors.
CREATE OR REPLACE FUNCTION _jobs_proxy_requeue_expired_on(shard integer)
RETURNS integer
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_check_shard('jobs_requeue_expired', shard);
    SELECT jobs_requeue_expired();
$$;

COMMENT ON FUNCTION _jobs_proxy_requeue_expired_on(integer) IS
    'skiplock proxy (private): jobs_requeue_expired on one shard.';
