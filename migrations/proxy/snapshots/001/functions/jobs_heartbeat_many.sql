-- jobs_heartbeat_many (proxy): extends many held jobs' leases, each on the shard its id names.
--
-- Promises: the shard's jobs_heartbeat_many, with ids and attempts split by shard (id % 1024) and sent
--           to each shard in parallel (_jobs_proxy_heartbeat_many_split); returns the union of the shards' rows, as
--           one server would. Each shard's part commits on its own. The arrays are checked on
--           the proxy first (_jobs_check_fence_arrays), and an id naming no configured shard
--           fails the call before any shard is asked.
-- Locks:    as the shard's function, on each shard.
-- States:   as the shard's function.
-- Errors:   22023 as the shard's function, and naming ids when an id's shard is not
--           configured; PL/Proxy's connection error naming a shard that is down.
CREATE OR REPLACE FUNCTION jobs_heartbeat_many(ids bigint[], attempts integer[], lease interval DEFAULT '5 minutes')
RETURNS TABLE (id bigint, extended boolean)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _jobs_check_fence_arrays('jobs_heartbeat_many', ids, attempts);
    IF cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    -- Every id's shard is checked before any shard runs: SPLIT would otherwise send the parts
    -- of the good shards before the bad id raised.
    PERFORM _jobs_proxy_id_shard('jobs_heartbeat_many', 'ids', i) FROM unnest(ids) AS i;
    RETURN QUERY SELECT * FROM _jobs_proxy_heartbeat_many_split(ids, attempts, lease);
END;
$$;
