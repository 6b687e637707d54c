-- jobs_metrics: per-queue gauges cheap enough to scrape every few seconds.
--
-- Promises: one row per queue that has waiting, queued, running, dead or cancelled jobs, an
--           estimate of done jobs above 0, or settings in jobs_queues, ordered by queue, then one row with queue NULL for
--           the whole table:
--             ready               queued jobs due now (run_at <= now())
--             scheduled           queued jobs with run_at in the future
--             running             running jobs
--             running_expired     running jobs whose lease has expired (not yet requeued)
--             dead, cancelled     exact counts
--             done_estimate       an ESTIMATE of the done jobs, from the planner's statistics
--                                 (pg_class.reltuples and the most common values of
--                                 jobs.queue, as of the last ANALYZE): rows of the table times
--                                 the queue's share, minus its other jobs. NULL, not 0, while
--                                 there are no statistics to go by: on every row before the
--                                 table was first vacuumed or analyzed (reltuples -1), and on
--                                 the queues' rows before the first ANALYZE
--             oldest_ready_age_s  seconds since the run_at of the oldest ready job (NULL
--                                 when none is ready)
--             jobs_created_total  NULL per queue; on the NULL-queue row, the number of job
--                                 ids handed out so far: the last value of jobs.id's identity
--                                 sequence, 0 before the first. Every created job took one,
--                                 and so did every insert that created none: an enqueue that
--                                 rolled back, and an enqueue deduplicated by its unique_key
--                                 (jobs_enqueue, jobs_enqueue_many and jobs_schedule_tick
--                                 return the live job's id but drew one). A crash or a
--                                 failover may skip up to 32. So an upper bound on the jobs
--                                 ever created, that never decreases (a counter: rate() works)
--             paused, max_running, per_key, max_starts, per
--                                 the queue's flow-control settings from jobs_queues (false
--                                 and NULLs without a row); a paused or limited queue is
--                                 listed even with no jobs; NULL on the NULL-queue row
--             waiting             jobs waiting for a parent (depends_on) to finish
--             fair, ordered, rate_per_key
--                                 the queue's flow shaping from jobs_queues (jobs_set_concurrency's
--                                 fair and ordered, jobs_set_rate_limit's per_key; false
--                                 without a row); NULL on the NULL-queue row
-- Cost:     no finished row is read: queued jobs from jobs_queued, running ones from the
--           jobs jobs_claims lists (one jobs_pkey probe each), waiting ones through their
--           unresolved jobs_dependencies rows (one probe each), dead and cancelled ones from
--           jobs_dead_cancelled, the done estimate from the catalogs. Under 20 ms with 1,000,000 done and 10,000
--           queued jobs (tests/sqltest/metrics_test.go guards the plan). Use jobs_stats() for
--           exact counts of every state (a scan of the whole table).
-- Locks:    none (a plain read). States: none.
-- Time:     now() (transaction start).
CREATE OR REPLACE FUNCTION jobs_metrics()
RETURNS SETOF jobs_queue_metrics
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
-- Never worth compiling: a few index probes, but the estimates of the small tables that list
-- jobs (before their first ANALYZE) can lift the plan's cost past jit_above_cost, and the
-- compilation then took 0.8 s of a 2 ms call.
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_reltuples double precision;
    v_sampled   boolean;
BEGIN
    SELECT c.reltuples INTO v_reltuples FROM pg_class c WHERE c.oid = 'jobs'::regclass;
    IF v_reltuples < 0 THEN
        v_reltuples := NULL; -- never vacuumed or analyzed
    END IF;
    -- Whether ANALYZE has sampled jobs.queue: without it, no queue has a share to go by.
    v_sampled := EXISTS (
        SELECT FROM pg_stats s
        WHERE s.schemaname = current_schema()
          AND s.tablename = 'jobs'
          AND s.attname = 'queue');

    RETURN QUERY
    WITH queued AS (
        SELECT q.queue,
               count(*) FILTER (WHERE q.run_at <= now()) AS ready,
               count(*) FILTER (WHERE q.run_at > now()) AS scheduled,
               min(q.run_at) FILTER (WHERE q.run_at <= now()) AS oldest_ready
        FROM jobs_queued q
        GROUP BY q.queue
    ), running AS (
        -- The jobs listed by the claims and still running under them.
        SELECT c.queue,
               count(*) AS running,
               count(*) FILTER (WHERE j.lease_expires_at < now()) AS expired
        FROM jobs_claims c
        CROSS JOIN LATERAL unnest(c.ids) AS u(id)
        -- One primary-key probe per listed job, whatever the statistics (OFFSET 0 keeps
        -- the planner from joining the tables another way).
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = u.id OFFSET 0) j
        WHERE j.claim_id = c.claim_id
          AND j.state = 'running'
        GROUP BY c.queue
    ), waiting AS (
        SELECT j.queue, count(*) AS waiting
        FROM (SELECT DISTINCT d.child_id AS id FROM jobs_dependencies d WHERE NOT d.resolved) AS w
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = w.id OFFSET 0) j
        WHERE j.state = 'waiting'
        GROUP BY j.queue
    ), failed AS (
        SELECT d.queue,
               count(*) FILTER (WHERE d.state = 'dead') AS dead,
               count(*) FILTER (WHERE d.state = 'cancelled') AS cancelled
        FROM jobs_dead_cancelled d
        GROUP BY d.queue
    ), sampled AS (
        -- Each queue's share of the table's rows in the last ANALYZE's sample.
        SELECT m.queue, m.freq
        FROM pg_stats s
        CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS m(queue, freq)
        WHERE s.schemaname = current_schema()
          AND s.tablename = 'jobs'
          AND s.attname = 'queue'
    ), per_queue AS (
        SELECT q.queue,
               coalesce(qu.ready, 0) AS ready,
               coalesce(qu.scheduled, 0) AS scheduled,
               coalesce(r.running, 0) AS running,
               coalesce(r.expired, 0) AS expired,
               coalesce(f.dead, 0) AS dead,
               coalesce(f.cancelled, 0) AS cancelled,
               coalesce(w.waiting, 0) AS waiting,
               -- NULL, not 0, without statistics (greatest() would turn NULL into 0).
               CASE WHEN v_reltuples IS NOT NULL AND v_sampled THEN
                   greatest(round(v_reltuples * coalesce(sa.freq, 0))::bigint
                            - coalesce(qu.ready, 0) - coalesce(qu.scheduled, 0) - coalesce(r.running, 0)
                            - coalesce(f.dead, 0) - coalesce(f.cancelled, 0) - coalesce(w.waiting, 0), 0)
               END AS done_estimate,
               qu.oldest_ready
        FROM (SELECT queued.queue FROM queued
              UNION SELECT running.queue FROM running
              UNION SELECT failed.queue FROM failed
              UNION SELECT waiting.queue FROM waiting
              UNION SELECT sampled.queue FROM sampled
              UNION SELECT s.queue FROM jobs_queues s) AS q
        LEFT JOIN queued qu ON qu.queue = q.queue
        LEFT JOIN running r ON r.queue = q.queue
        LEFT JOIN failed f ON f.queue = q.queue
        LEFT JOIN waiting w ON w.queue = q.queue
        LEFT JOIN sampled sa ON sa.queue = q.queue
    )
    SELECT p.queue, p.ready, p.scheduled, p.running, p.expired, p.dead, p.cancelled,
           p.done_estimate,
           extract(epoch FROM now() - p.oldest_ready)::double precision,
           NULL::bigint,
           coalesce(s.paused, false), s.max_running, s.per_key, s.max_starts, s.per, p.waiting,
           coalesce(s.fair, false), coalesce(s.ordered, false), coalesce(s.rate_per_key, false)
    FROM per_queue p
    LEFT JOIN jobs_queues s ON s.queue = p.queue
    -- A queue known only from stale statistics, with nothing left in it and no settings, is
    -- not listed.
    WHERE p.ready + p.scheduled + p.running + p.dead + p.cancelled + p.waiting + coalesce(p.done_estimate, 0) > 0
       OR s.queue IS NOT NULL
    UNION ALL
    SELECT NULL::text,
           coalesce(sum(p.ready), 0)::bigint,
           coalesce(sum(p.scheduled), 0)::bigint,
           coalesce(sum(p.running), 0)::bigint,
           coalesce(sum(p.expired), 0)::bigint,
           coalesce(sum(p.dead), 0)::bigint,
           coalesce(sum(p.cancelled), 0)::bigint,
           CASE WHEN v_reltuples IS NOT NULL THEN
               greatest(round(v_reltuples)::bigint
                        - coalesce(sum(p.ready + p.scheduled + p.running + p.dead + p.cancelled + p.waiting), 0)::bigint, 0)
           END,
           extract(epoch FROM now() - min(p.oldest_ready))::double precision,
           coalesce(pg_sequence_last_value(pg_get_serial_sequence('jobs', 'id')::regclass), 0),
           NULL::boolean, NULL::integer, NULL::integer, NULL::integer, NULL::interval,
           coalesce(sum(p.waiting), 0)::bigint,
           NULL::boolean, NULL::boolean, NULL::boolean
    FROM per_queue p
    ORDER BY 1 NULLS LAST;
END;
$$;

COMMENT ON FUNCTION jobs_metrics() IS
    'skiplock: per queue ready, scheduled, running, expired, dead, cancelled, estimated done and oldest ready age, without reading finished rows; a NULL-queue row totals them with jobs created ever.';
