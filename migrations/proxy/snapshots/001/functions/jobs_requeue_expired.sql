-- jobs_requeue_expired (proxy): takes back expired leases on every shard.
--
-- Promises: runs the shard's jobs_requeue_expired on each shard in turn (shard 0 first), each in a
--           transaction of its own there, and returns the sum of the shards' counts.
--           A shard that cannot be reached (SQLSTATE class 08, or PL/Proxy's connection
--           error XX000 naming the partition) is skipped with a WARNING naming it, so the
--           shards that are up keep their housekeeping; when no shard answers, the last
--           error is raised. Any other error of a shard is raised at once.
-- Locks:    as the shard's function, on each shard.
-- States:   as the shard's function.
-- Errors:   the shards' errors (22023 as the shard's function).
CREATE OR REPLACE FUNCTION jobs_requeue_expired()
RETURNS integer
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_total integer := 0;
    v_one integer;
    v_shard integer;
    v_answered boolean := false;
    v_state text;
    v_message text;
BEGIN
    FOR v_shard IN 0 .. _jobs_proxy_shard_count() - 1 LOOP
        BEGIN
            v_one := _jobs_proxy_requeue_expired_on(v_shard);
            v_total := v_total + coalesce(v_one, 0);
            v_answered := true;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT;
            IF NOT _jobs_proxy_unreachable(v_state, v_message) THEN
                RAISE;
            END IF;
            RAISE WARNING 'skiplock proxy: jobs_requeue_expired skipped shard %: %', v_shard, v_message;
        END;
    END LOOP;
    IF NOT v_answered AND v_message IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    END IF;
    RETURN v_total;
END;
$$;
