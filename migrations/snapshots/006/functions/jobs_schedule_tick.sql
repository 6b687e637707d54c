-- jobs_schedule_tick: enqueues the jobs of the due schedules; returns how many.
--
-- Promises: for every enabled schedule whose next_run_at has come, enqueues one job (as
--           jobs_enqueue does, with the schedule's kind, payload, queue, priority and
--           max_attempts) whose run_at is the scheduled instant, and advances the schedule,
--           in the caller's transaction: both commit or neither does. Each scheduled
--           instant is enqueued exactly once whatever the number of concurrent callers: a
--           schedule is taken with FOR UPDATE SKIP LOCKED (a concurrent caller skips it), and
--           under that lock an instant is enqueued only if it is later than last_run_at, which
--           the same transaction moves to it. A tick whose transaction is rolled back leaves
--           the instant due, and the next tick enqueues it. After downtime, missed instants
--           are not replayed one by one: one job for the latest missed instant (<= now()),
--           then next_run_at moves to the first instant after it. When nothing is due it
--           costs one probe of jobs_schedules_due_idx.
-- Locks:    the due schedules' rows, until the caller's transaction ends; skips rows
--           locked by others. Inserts the jobs.
-- States:   new jobs in queued (NOTIFY jobs_ready as jobs_enqueue, at commit).
-- Time:     now() (transaction start) decides what is due. Time zone names are read with
--           timezone_abbreviations = 'Default' (see jobs_cron_next).
-- Errors:   none of its own.
CREATE OR REPLACE FUNCTION jobs_schedule_tick()
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
SET timezone_abbreviations = 'Default'
AS $$
#variable_conflict use_column
DECLARE
    v_schedule record;
    v_instant  timestamptz;
    v_job_id   bigint;
    v_count    integer := 0;
BEGIN
    FOR v_schedule IN
        SELECT s.name, s.cron, s.timezone, s.kind, s.payload, s.queue, s.priority, s.max_attempts,
               s.next_run_at, s.last_run_at, s.last_job_id
        FROM jobs_schedules s
        WHERE s.enabled
          AND s.next_run_at <= now()
        ORDER BY s.next_run_at
        FOR UPDATE SKIP LOCKED
    LOOP
        -- The row is locked and re-read as of its latest committed version, so another
        -- tick's advance is seen here (and the row then no longer due is not returned).
        v_instant := _jobs_cron_latest('jobs_schedule_tick', v_schedule.cron, v_schedule.timezone,
                                       v_schedule.next_run_at, now());
        v_job_id := v_schedule.last_job_id;
        IF v_schedule.last_run_at IS NULL OR v_instant > v_schedule.last_run_at THEN
            v_job_id := jobs_enqueue(v_schedule.kind, v_schedule.payload, v_schedule.queue, v_instant,
                                     v_schedule.priority, v_schedule.max_attempts);
            v_count := v_count + 1;
        ELSE
            v_instant := v_schedule.last_run_at;
        END IF;
        UPDATE jobs_schedules s
        SET last_run_at = v_instant,
            last_job_id = v_job_id,
            next_run_at = _jobs_cron_next('jobs_schedule_tick', v_schedule.cron, v_instant, v_schedule.timezone)
        WHERE s.name = v_schedule.name;
    END LOOP;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_schedule_tick() IS
    'skiplock: enqueues one job per due schedule (the latest missed instant after downtime) and advances it; exactly once per instant.';
