-- _jobs_proxy_shard_count: how many shards the proxy routes to.
--
-- Promises: returns the shard count jobs_proxy_set_shards recorded in jobs_proxy_cluster, in
--           the transaction that set the partitions (options p0, p1, ...) of the foreign server
--           skiplock_shards, PL/Proxy's cluster; the shards are numbered 0 to count - 1 and
--           partition pN is shard N. 0 before the first jobs_proxy_set_shards. A one-row
--           table rather than the server's options because every routed call asks: reading
--           the row costs a few microseconds, unpacking pg_foreign_server.srvoptions about ten
--           times more.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_proxy_shard_count()
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
    SELECT c.shards FROM jobs_proxy_cluster c
$$;

COMMENT ON FUNCTION _jobs_proxy_shard_count() IS
    'skiplock proxy (private): the number of shards in the skiplock_shards cluster.';
