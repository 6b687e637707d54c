-- jobs_schedule_run: enqueues one job from the schedule name now; returns the job's id.
--
-- Promises: enqueues a job as jobs_enqueue does, with the schedule's kind, payload, queue,
--           priority and max_attempts and run_at = now(), whether or not the schedule is
--           enabled. The schedule itself is left alone: next_run_at, last_run_at and
--           last_job_id keep their values, so the regular runs neither shift nor skip.
-- Locks:    none on the schedule (a plain read: a tick taking it, or a jobs_unschedule,
--           neither waits for this call nor is waited for). Inserts one job.
-- States:   a new job in queued (NOTIFY jobs_ready at commit).
-- Time:     now() (transaction start) is the job's run_at.
-- Errors:   22023 when name is NULL or no schedule has that name.
CREATE OR REPLACE FUNCTION jobs_schedule_run(name text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_schedule record;
BEGIN
    IF jobs_schedule_run.name IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule_run', 'name', 'must not be NULL');
    END IF;

    SELECT s.kind, s.payload, s.queue, s.priority, s.max_attempts INTO v_schedule
    FROM jobs_schedules s
    WHERE s.name = jobs_schedule_run.name;
    IF NOT FOUND THEN
        PERFORM _jobs_invalid('jobs_schedule_run', 'name', format('%L is not a schedule', jobs_schedule_run.name));
    END IF;

    RETURN jobs_enqueue(v_schedule.kind, v_schedule.payload, v_schedule.queue, now(),
                        v_schedule.priority, v_schedule.max_attempts);
END;
$$;

COMMENT ON FUNCTION jobs_schedule_run(text) IS
    'skiplock: enqueues one job from a schedule now, leaving its next and last run alone; returns the job id.';
