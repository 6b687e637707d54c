-- _jobs_proxy_check_shard: validates a shard number given by the caller (jobs_claim_on) or
-- by a proxy function looping over the shards.
--
-- Promises: returns shard when 0 <= shard < the number of configured shards.
-- Locks:    none. States: none.
-- Errors:   22023 naming shard when it is NULL or not a configured shard.
CREATE OR REPLACE FUNCTION _jobs_proxy_check_shard(func text, shard integer)
RETURNS integer
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_count integer := _jobs_proxy_shard_count();
BEGIN
    IF _jobs_proxy_check_shard.shard IS NULL THEN
        PERFORM _jobs_invalid(_jobs_proxy_check_shard.func, 'shard', 'must not be NULL');
    END IF;
    IF _jobs_proxy_check_shard.shard < 0 OR _jobs_proxy_check_shard.shard >= v_count THEN
        PERFORM _jobs_invalid(_jobs_proxy_check_shard.func, 'shard',
            format('must be one of this proxy''s shards, 0 to %s, got %s', v_count - 1, _jobs_proxy_check_shard.shard));
    END IF;
    RETURN _jobs_proxy_check_shard.shard;
END;
$$;

COMMENT ON FUNCTION _jobs_proxy_check_shard(text, integer) IS
    'skiplock proxy (private): validates a shard number (22023 naming shard).';
