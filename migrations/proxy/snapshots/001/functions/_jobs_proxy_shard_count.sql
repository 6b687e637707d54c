-- _jobs_proxy_shard_count: how many shards the proxy routes to.
--
-- Promises: returns the number of partitions (options p0, p1, ...) of the foreign server
--           skiplock_shards, PL/Proxy's cluster, as jobs_proxy_set_shards left it; the shards
--           are numbered 0 to count - 1 and partition pN is shard N. 0 when none is set.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_proxy_shard_count()
RETURNS integer
LANGUAGE sql
STABLE
SET search_path FROM CURRENT
AS $$
    SELECT count(*)::integer
    FROM pg_foreign_server s
    CROSS JOIN LATERAL pg_options_to_table(s.srvoptions) o
    WHERE s.srvname = 'skiplock_shards'
      AND o.option_name ~ '^p[0-9]+$'
$$;

COMMENT ON FUNCTION _jobs_proxy_shard_count() IS
    'skiplock proxy (private): the number of shards in the skiplock_shards cluster.';
