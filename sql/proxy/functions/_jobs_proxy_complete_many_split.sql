-- _jobs_proxy_complete_many_split: the shard's jobs_complete_many, each id sent to its own
-- shard (PL/Proxy SPLIT).
--
-- Promises: splits ids, attempts and results element by element by _jobs_proxy_id_shard and
--           runs the shard's jobs_complete_many on each shard with its part, in parallel, each
--           in a transaction of its own there; returns the union of the shards' rows. results
--           must be as long as ids (PL/Proxy splits a NULL array as an empty one): the caller
--           passes NULLs for no results.
-- Locks:    as the shard's function. States: as the shard's function.
-- Errors:   22023 naming ids when an id's shard is not configured; the shards' errors.
CREATE OR REPLACE FUNCTION _jobs_proxy_complete_many_split(ids bigint[], attempts integer[], results jsonb[])
RETURNS SETOF bigint
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    SPLIT ids, attempts, results;
    RUN ON _jobs_proxy_id_shard('jobs_complete_many', 'ids', ids);
    TARGET jobs_complete_many;
$$;

COMMENT ON FUNCTION _jobs_proxy_complete_many_split(bigint[], integer[], jsonb[]) IS
    'skiplock proxy (private): jobs_complete_many split by shard.';
