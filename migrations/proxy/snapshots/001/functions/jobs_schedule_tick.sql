-- jobs_schedule_tick (proxy): enqueues the schedules' due runs on every shard.
--
-- Promises: runs the shard's jobs_schedule_tick on each shard in turn (shard 0 first;
--           _jobs_proxy_sum_each), each in a transaction of its own there, and returns the sum of the shards' counts.
--           A shard that cannot be reached (SQLSTATE class 08, or PL/Proxy's connection
--           error XX000 naming the partition) is skipped with a WARNING naming it, so the
--           shards that are up keep their housekeeping; when no shard answers, the last
--           error is raised. Any other error of a shard is raised at once.
-- Locks:    as the shard's function, on each shard.
-- States:   as the shard's function.
-- Errors:   the shards' errors (22023 as the shard's function).
CREATE OR REPLACE FUNCTION jobs_schedule_tick()
RETURNS integer
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    SELECT _jobs_proxy_sum_each('jobs_schedule_tick')
$$;
