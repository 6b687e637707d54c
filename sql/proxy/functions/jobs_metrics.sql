-- jobs_metrics (proxy): every queue's gauges, from every shard, shaped as one server's.
--
-- Promises: the shards' jobs_metrics run on all shards in parallel (RUN ON ALL): one row per
--           queue, ordered by queue (a queue lives on one shard, so its row is that shard's),
--           then one NULL-queue row for all shards: the sums of the counts (done_estimate
--           NULL when no shard has an estimate; jobs_created_total the sum of the shards'),
--           and the largest oldest_ready_age_s.
-- Locks:    none. States: none.
-- Errors:   when a shard is down, PL/Proxy's connection error naming it: a partial answer
--           would look like jobs that vanished.
CREATE OR REPLACE FUNCTION jobs_metrics()
RETURNS SETOF jobs_queue_metrics
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH m AS MATERIALIZED (
        SELECT * FROM _jobs_proxy_metrics_all()
    )
    SELECT * FROM (SELECT * FROM m WHERE m.queue IS NOT NULL ORDER BY m.queue) AS per_queue
    UNION ALL
    SELECT NULL::text, sum(ready)::bigint, sum(scheduled)::bigint, sum(running)::bigint,
           sum(running_expired)::bigint, sum(dead)::bigint, sum(cancelled)::bigint,
           sum(done_estimate)::bigint, max(oldest_ready_age_s), sum(jobs_created_total)::bigint,
           NULL::boolean, NULL::integer, NULL::integer, NULL::integer, NULL::interval
    FROM m
    WHERE m.queue IS NULL
$$;
