-- _jobs_proxy_shard_count: how many shards the proxy routes to.
--
-- Promises: returns the shard count jobs_proxy_set_shards recorded (jobs_proxy_cluster_changes),
--           in the transaction that set the partitions (options p0, p1, ...) of the foreign server
--           skiplock_shards, PL/Proxy's cluster; the shards are numbered 0 to count - 1 and
--           partition pN is shard N. 0 before the first jobs_proxy_set_shards. A one-row
--           table rather than the server's options because every routed call asks: reading
--           the row costs a few microseconds, unpacking pg_foreign_server.srvoptions about ten
--           times more.
--           Never more than PL/Proxy's cluster has partitions in this session: PL/Proxy
--           reloads the cluster only when the session processes catalog invalidations (at
--           the start of a transaction, not between the statements of an open one), and
--           modular mapping sends a shard number at or above the stale count to partition
--           number % count, another shard. So a transaction that started before shards were
--           added, or up to a second after jobs_proxy_set_shards recorded the change (the
--           change commits right after), still gets the previous count: ids of the new
--           shards are then refused (22023) and new queues pinned among the old shards,
--           rather than routed to the wrong shard.
-- Locks:    none. States: none.
-- Time:     now() (transaction start).
CREATE OR REPLACE FUNCTION _jobs_proxy_shard_count()
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
    -- The newest change at least a second older than this transaction (the first
    -- configuration is recorded at -infinity); 0 before any.
    SELECT coalesce((SELECT h.shards FROM jobs_proxy_cluster_changes h
                     WHERE h.changed_at <= now() - interval '1 second'
                     ORDER BY h.changed_at DESC LIMIT 1), 0)
$$;

COMMENT ON FUNCTION _jobs_proxy_shard_count() IS
    'skiplock proxy (private): the number of shards in the skiplock_shards cluster.';
