-- jobs_maintain (proxy): one round of housekeeping on every shard.
--
-- Promises: runs the shard's jobs_maintain on each shard in turn (shard 0 first), each in a
--           transaction of its own there, and returns one row merging the shards' rows (ran and more: any shard's; the counts: sums).
--           A shard that cannot be reached (SQLSTATE class 08, or PL/Proxy's connection
--           error XX000 naming the partition) is skipped with a WARNING naming it, so the
--           shards that are up keep their housekeeping; when no shard answers, the last
--           error is raised. Any other error of a shard is raised at once.
-- Locks:    as the shard's function, on each shard.
-- States:   as the shard's function.
-- Errors:   the shards' errors (22023 as the shard's function).
CREATE OR REPLACE FUNCTION jobs_maintain(max_jobs integer DEFAULT 10000)
RETURNS jobs_maintenance
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_total jobs_maintenance := ROW(false, 0, 0, 0, 0, false);
    v_one jobs_maintenance;
    v_shard integer;
    v_answered boolean := false;
    v_state text;
    v_message text;
BEGIN
    FOR v_shard IN 0 .. _jobs_proxy_shard_count() - 1 LOOP
        BEGIN
        v_one := _jobs_proxy_maintain_on(v_shard, max_jobs);
        v_total.ran := v_total.ran OR v_one.ran;
        v_total.requeued := v_total.requeued + v_one.requeued;
        v_total.pruned_done := v_total.pruned_done + v_one.pruned_done;
        v_total.pruned_cancelled := v_total.pruned_cancelled + v_one.pruned_cancelled;
        v_total.pruned_dead := v_total.pruned_dead + v_one.pruned_dead;
        v_total.more := v_total.more OR v_one.more;
            v_answered := true;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT;
            IF NOT _jobs_proxy_unreachable(v_state, v_message) THEN
                RAISE;
            END IF;
            RAISE WARNING 'skiplock proxy: jobs_maintain skipped shard %: %', v_shard, v_message;
        END;
    END LOOP;
    IF NOT v_answered AND v_message IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    END IF;
    RETURN v_total;
END;
$$;
