-- jobs_stats: how many jobs each queue has in each state, and how long the oldest ready job has waited.
--
-- Promises: one row per (queue, state) that has jobs, ordered by queue then state.
--           oldest_ready_age is set on the queued row only: now() minus the run_at of the
--           oldest queued job that is due (NULL when none is due). Queue depth and that age
--           are what to alert on.
-- Cost:     counts every row, finished ones included (a sequential scan); prune finished
--           jobs with jobs_prune to keep it cheap.
-- Locks:    none (a plain read). States: none.
-- Time:     now() (transaction start).
CREATE OR REPLACE FUNCTION jobs_stats()
RETURNS SETOF jobs_queue_stats
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT j.queue,
           j.state,
           count(*),
           CASE WHEN j.state = 'queued' THEN now() - min(j.run_at) FILTER (WHERE j.run_at <= now()) END
    FROM jobs j
    GROUP BY j.queue, j.state
    ORDER BY j.queue, j.state;
END;
$$;

COMMENT ON FUNCTION jobs_stats() IS
    'skiplock: per queue and state, the job count and (queued) the age of the oldest due job.';
