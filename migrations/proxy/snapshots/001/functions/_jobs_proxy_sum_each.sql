-- _jobs_proxy_sum_each: runs a shard function that returns a count on every shard in turn and
-- sums the counts (the body of the proxy's jobs_requeue_expired and jobs_schedule_tick).
--
-- Promises: calls _jobs_proxy_<name>_on(shard) for func = 'jobs_<name>' on shard 0, 1, ...,
--           each a transaction of its own on its shard, and returns the sum of their counts.
--           A shard that cannot be reached (_jobs_proxy_unreachable) is skipped with a WARNING
--           naming func and the shard, so the shards that are up keep their housekeeping; when
--           no shard answers, the last such error is raised. Any other error is raised at once.
--           Runs with the caller's rights, so each shard checks the caller's grants.
-- Locks:    as the shard function, on each shard. States: as the shard function.
-- Errors:   the shards' errors.
CREATE OR REPLACE FUNCTION _jobs_proxy_sum_each(func text)
RETURNS integer
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_call text := format('SELECT %I($1)', '_jobs_proxy_' || substr(func, length('jobs_') + 1) || '_on');
    v_total integer := 0;
    v_one integer;
    v_shard integer;
    v_answered boolean := false;
    v_state text;
    v_message text;
BEGIN
    FOR v_shard IN 0 .. _jobs_proxy_shard_count() - 1 LOOP
        BEGIN
            EXECUTE v_call INTO v_one USING v_shard;
            v_total := v_total + coalesce(v_one, 0);
            v_answered := true;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT;
            IF NOT _jobs_proxy_unreachable(v_state, v_message) THEN
                RAISE;
            END IF;
            RAISE WARNING 'skiplock proxy: % skipped shard %: %', func, v_shard, v_message;
        END;
    END LOOP;
    IF NOT v_answered AND v_message IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    END IF;
    RETURN v_total;
END;
$$;

COMMENT ON FUNCTION _jobs_proxy_sum_each(text) IS
    'skiplock proxy (private): a count-returning shard function on every shard in turn, summed; unreachable shards skipped.';
