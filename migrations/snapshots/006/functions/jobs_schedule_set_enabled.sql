-- jobs_schedule_set_enabled: enables or disables the schedule name; returns whether it changed.
--
-- Promises: sets the schedule's enabled flag. true when this call changed it, false when it
--           already had that value (then nothing changes, not even updated_at). A disabled
--           schedule keeps its row and enqueues nothing (jobs_schedule_tick skips it). A
--           re-enabled schedule's next run is recomputed from now() (or from its last run, if
--           later), as jobs_schedule does: runs missed while disabled are not enqueued.
-- Locks:    the schedule's row, until the caller's transaction ends (waits for a
--           jobs_schedule_tick holding it).
-- States:   none.
-- Time:     now() (transaction start).
--           Time zone names are read with timezone_abbreviations = 'Default' (see
--           jobs_cron_next), so the next run does not depend on the caller's session.
-- Errors:   22023 when name or enabled is NULL, or no schedule has that name.
CREATE OR REPLACE FUNCTION jobs_schedule_set_enabled(name text, enabled boolean)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
SET timezone_abbreviations = 'Default'
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_schedule_set_enabled.name IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule_set_enabled', 'name', 'must not be NULL');
    END IF;
    IF jobs_schedule_set_enabled.enabled IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule_set_enabled', 'enabled', 'must not be NULL');
    END IF;

    UPDATE jobs_schedules s
    SET enabled     = jobs_schedule_set_enabled.enabled,
        -- Later than last_run_at in both branches (jobs_schedules_next_after_last).
        next_run_at = CASE
            WHEN jobs_schedule_set_enabled.enabled
            THEN _jobs_cron_next('jobs_schedule_set_enabled', s.cron, greatest(now(), s.last_run_at), s.timezone)
            ELSE s.next_run_at
        END,
        updated_at  = now()
    WHERE s.name = jobs_schedule_set_enabled.name
      AND s.enabled <> jobs_schedule_set_enabled.enabled;
    IF FOUND THEN
        RETURN true;
    END IF;

    PERFORM FROM jobs_schedules s WHERE s.name = jobs_schedule_set_enabled.name;
    IF NOT FOUND THEN
        PERFORM _jobs_invalid('jobs_schedule_set_enabled', 'name',
                              format('%L is not a schedule', jobs_schedule_set_enabled.name));
    END IF;
    RETURN false;
END;
$$;

COMMENT ON FUNCTION jobs_schedule_set_enabled(text, boolean) IS
    'skiplock: enables or disables a schedule; true when this call changed it. Re-enabling recomputes the next run from now.';
