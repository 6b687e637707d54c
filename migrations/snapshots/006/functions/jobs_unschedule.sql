-- jobs_unschedule: deletes the schedule name; returns whether it existed.
--
-- Promises: the schedule enqueues nothing more once the caller's transaction commits. Jobs
--           it already enqueued are left alone (cancel them with jobs_cancel).
-- Locks:    the schedule's row (waits for a jobs_schedule_tick holding it).
-- States:   none.
-- Errors:   22023 when name is NULL.
CREATE OR REPLACE FUNCTION jobs_unschedule(name text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_unschedule.name IS NULL THEN
        PERFORM _jobs_invalid('jobs_unschedule', 'name', 'must not be NULL');
    END IF;
    DELETE FROM jobs_schedules s
    WHERE s.name = jobs_unschedule.name;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION jobs_unschedule(text) IS
    'skiplock: deletes a named cron schedule; returns whether it existed.';
