-- _jobs_proxy_complete_many_split: the shard's jobs_complete_many, each id sent to its own shard (PL/Proxy SPLIT).
--
-- Promises: splits ids and attempts element by element by _jobs_proxy_id_shard and runs the
--           shard's jobs_complete_many on each shard with its part, in parallel, each in a
--           transaction of its own there; returns the union of the shards' rows.
-- Locks:    as the shard's function. States: as the shard's function.
-- Errors:   22023 naming ids when an id's shard is not configured; the shards' errors.
CREATE OR REPLACE FUNCTION _jobs_proxy_complete_many_split(ids bigint[], attempts integer[])
RETURNS SETOF bigint
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    SPLIT ids, attempts;
    RUN ON _jobs_proxy_id_shard('jobs_complete_many', 'ids', ids);
    TARGET jobs_complete_many;
$$;

COMMENT ON FUNCTION _jobs_proxy_complete_many_split(bigint[], integer[]) IS
    'skiplock proxy (private): jobs_complete_many split by shard.';
