-- _jobs_proxy_id_shard: the shard that holds a job, from its id alone (the RUN ON of every
-- id-taking proxy function).
--
-- Promises: returns id % 1024 (the low 10 bits, which jobs_set_shard puts in every id) when
--           that shard is configured; PL/Proxy's modular mapping (partition = hash % count)
--           then picks partition pN = shard N. A NULL id goes to shard 0, whose function gives
--           the same 22023 every shard gives. Never a lookup: adding shards changes nothing
--           for existing ids.
-- Locks:    none. States: none.
-- Errors:   22023 naming param (as func's parameter) when the id's shard is not configured
--           (or the id is negative): routing it anywhere would silently answer false or NULL.
CREATE OR REPLACE FUNCTION _jobs_proxy_id_shard(func text, param text, id bigint)
RETURNS integer
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_shard integer;
    v_count integer;
BEGIN
    IF _jobs_proxy_id_shard.id IS NULL THEN
        RETURN 0;
    END IF;
    v_shard := (_jobs_proxy_id_shard.id % 1024)::integer;
    v_count := _jobs_proxy_shard_count();
    IF v_shard < 0 OR v_shard >= v_count THEN
        PERFORM _jobs_invalid(_jobs_proxy_id_shard.func, _jobs_proxy_id_shard.param,
            format('%s names shard %s, which is not one of this proxy''s %s shards (id %% 1024 must be below %s)',
                   _jobs_proxy_id_shard.id, v_shard, v_count, v_count));
    END IF;
    RETURN v_shard;
END;
$$;

COMMENT ON FUNCTION _jobs_proxy_id_shard(text, text, bigint) IS
    'skiplock proxy (private): the shard of a job id (id % 1024); 22023 when no such shard is configured.';
