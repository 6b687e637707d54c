-- jobs_metrics (proxy): every queue's gauges, from every shard, shaped as one server's.
--
-- Promises: the shards' jobs_metrics run on all shards in parallel (RUN ON ALL): one row per
--           queue, ordered by queue, then one NULL-queue row for all shards. A queue lives
--           on one shard through the proxy, so its row is normally that shard's; a queue
--           with jobs on several shards (enqueued on the shards directly) still gets one
--           row, merged like the NULL-queue row, so that exporters never see a queue twice.
--           Merged rows: the sums of the counts (waiting included; done_estimate NULL when no
--           shard has an estimate; jobs_created_total the sum of the shards'), the largest
--           oldest_ready_age_s, paused when any shard pauses the queue, and each limit
--           (max_running, per_key, max_starts, per) when every shard has the same one,
--           else NULL; fair, ordered and rate_per_key when every shard sets them.
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
    SELECT m.queue, sum(m.ready)::bigint, sum(m.scheduled)::bigint, sum(m.running)::bigint,
           sum(m.running_expired)::bigint, sum(m.dead)::bigint, sum(m.cancelled)::bigint,
           sum(m.done_estimate)::bigint, max(m.oldest_ready_age_s), sum(m.jobs_created_total)::bigint,
           CASE WHEN m.queue IS NOT NULL THEN bool_or(m.paused) END,
           CASE WHEN m.queue IS NOT NULL AND count(DISTINCT m.max_running) <= 1 AND count(m.max_running) IN (0, count(*)) THEN max(m.max_running) END,
           CASE WHEN m.queue IS NOT NULL AND count(DISTINCT m.per_key) <= 1 AND count(m.per_key) IN (0, count(*)) THEN max(m.per_key) END,
           CASE WHEN m.queue IS NOT NULL AND count(DISTINCT m.max_starts) <= 1 AND count(m.max_starts) IN (0, count(*)) THEN max(m.max_starts) END,
           CASE WHEN m.queue IS NOT NULL AND count(DISTINCT m.per) <= 1 AND count(m.per) IN (0, count(*)) THEN max(m.per) END,
           sum(m.waiting)::bigint,
           CASE WHEN m.queue IS NOT NULL THEN bool_and(m.fair) END,
           CASE WHEN m.queue IS NOT NULL THEN bool_and(m.ordered) END,
           CASE WHEN m.queue IS NOT NULL THEN bool_and(m.rate_per_key) END
    FROM m
    GROUP BY m.queue
    ORDER BY m.queue NULLS LAST
$$;
