-- jobs_complete_many (proxy): marks many held jobs done, each on the shard its id names.
--
-- Promises: the shard's jobs_complete_many, with ids, attempts and results split by shard (id
--           % 1024) and sent to each shard in parallel (_jobs_proxy_complete_many_split);
--           returns the union of the shards' rows, as one server would. Each shard's part
--           commits on its own. The arrays are checked on the proxy first
--           (_jobs_check_fence_arrays, and results as the shard checks it), and an id naming no
--           configured shard fails the call before any shard is asked. results NULL (no
--           results) is sent as NULLs, which the shard stores as it stores no result.
-- Locks:    as the shard's function, on each shard.
-- States:   as the shard's function.
-- Errors:   22023 as the shard's function, and naming ids when an id's shard is not
--           configured; PL/Proxy's connection error naming a shard that is down.
CREATE OR REPLACE FUNCTION jobs_complete_many(ids bigint[], attempts integer[], results jsonb[] DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _jobs_check_fence_arrays('jobs_complete_many', ids, attempts);
    -- The shard's checks of results, here so that a bad result fails the whole call before
    -- any shard's part commits.
    IF results IS NOT NULL THEN
        IF array_ndims(results) > 1 OR coalesce(cardinality(results), 0) <> cardinality(ids) THEN
            PERFORM _jobs_invalid('jobs_complete_many', 'results',
                                  'must be NULL or a one-dimensional array as long as ids');
        END IF;
        IF EXISTS (SELECT FROM unnest(results) AS r WHERE octet_length(r::text) > 1048576) THEN
            PERFORM _jobs_invalid('jobs_complete_many', 'results', 'must hold results of at most 1 MB (as JSON text)');
        END IF;
    END IF;
    IF cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    -- Every id's shard is checked before any shard runs: SPLIT would otherwise send the parts
    -- of the good shards before the bad id raised.
    PERFORM _jobs_proxy_id_shard('jobs_complete_many', 'ids', i) FROM unnest(ids) AS i;
    RETURN QUERY SELECT * FROM _jobs_proxy_complete_many_split(ids, attempts,
        coalesce(results, array_fill(NULL::jsonb, ARRAY[cardinality(ids)])));
END;
$$;
