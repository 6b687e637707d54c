-- _jobs_proxy_metrics_all: every shard's jobs_metrics rows (RUN ON ALL), unmerged.
--
-- Promises: the union of the shards' jobs_metrics rows, each shard's NULL-queue row included.
-- Locks:    none. States: none.
-- Errors:   when a shard is down, PL/Proxy's connection error naming it.
CREATE OR REPLACE FUNCTION _jobs_proxy_metrics_all()
RETURNS SETOF jobs_queue_metrics
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON ALL;
    TARGET jobs_metrics;
$$;

COMMENT ON FUNCTION _jobs_proxy_metrics_all() IS
    'skiplock proxy (private): jobs_metrics of every shard, unmerged.';
