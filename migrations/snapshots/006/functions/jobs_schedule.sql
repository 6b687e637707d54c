-- jobs_schedule: creates or updates the schedule name; returns its next run time.
--
-- Promises: upserts the row of jobs_schedules named name. A new schedule's next run is the
--           first instant of cron (in timezone; see jobs_cron_next) after the call's
--           clock_timestamp() (not now(): a schedule created in a long transaction does not
--           start in the past). Calling it
--           again with the same arguments changes nothing, not even updated_at, and keeps
--           the next run time, so services that declare their schedules at every start
--           neither re-fire nor skip a run. A changed kind, payload, queue, priority or
--           max_attempts applies to the jobs enqueued from then on and keeps the next run
--           time; a changed cron or timezone, or enabling a disabled schedule, recomputes it
--           from clock_timestamp() (or from the last run, if later), so instants missed while
--           disabled are not enqueued. Disabling keeps the row; jobs_schedule_tick skips it.
--           jobs_unschedule then jobs_schedule of the same name starts a new schedule (the
--           old last_run_at is gone), yet never enqueues an instant twice: a tick that
--           enqueued an instant of the old row held its lock, so jobs_unschedule waited for
--           it to commit, and the new row's first run is after the clock at the call, later
--           than that instant.
--           Returns NULL when the schedule has no run left (only possible on re-enabling a
--           schedule near the end of the supported range).
-- Locks:    the schedule's row, until the caller's transaction ends (waits for a
--           jobs_schedule_tick holding it).
-- States:   none (jobs are enqueued by jobs_schedule_tick).
-- Time:     clock_timestamp() (the moment of the call, not the transaction start).
--           Time zone names are read with timezone_abbreviations = 'Default' (see
--           jobs_cron_next).
-- Errors:   22023 when name, kind or queue is NULL, empty or longer than 200 bytes, payload,
--           priority or enabled is NULL, max_attempts is NULL or < 1, cron is not a valid
--           expression (naming the field) or never runs, or timezone is not a known zone.
CREATE OR REPLACE FUNCTION jobs_schedule(
    name         text,
    cron         text,
    kind         text,
    payload      jsonb   DEFAULT '{}',
    queue        text    DEFAULT 'default',
    timezone     text    DEFAULT 'UTC',
    priority     integer DEFAULT 0,
    max_attempts integer DEFAULT 5,
    enabled      boolean DEFAULT true
)
RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
SET timezone_abbreviations = 'Default'
AS $$
#variable_conflict use_column
DECLARE
    v_next timestamptz;
BEGIN
    IF jobs_schedule.name IS NULL OR jobs_schedule.name = '' OR octet_length(jobs_schedule.name) > 200 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'name', 'must be a non-empty string of at most 200 bytes');
    END IF;
    -- Checks cron and timezone, naming them.
    v_next := _jobs_cron_next('jobs_schedule', jobs_schedule.cron, clock_timestamp(), jobs_schedule.timezone);
    IF v_next IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'cron', format('%L never runs (no run within ten years)', jobs_schedule.cron));
    END IF;
    IF jobs_schedule.kind IS NULL OR jobs_schedule.kind = '' OR octet_length(jobs_schedule.kind) > 200 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'kind', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_schedule.payload IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'payload', 'must not be NULL (use ''{}'' for no payload)');
    END IF;
    IF jobs_schedule.queue IS NULL OR jobs_schedule.queue = '' OR octet_length(jobs_schedule.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_schedule.priority IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'priority', 'must not be NULL');
    END IF;
    IF jobs_schedule.max_attempts IS NULL OR jobs_schedule.max_attempts < 1 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'max_attempts', 'must be at least 1');
    END IF;
    IF jobs_schedule.enabled IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'enabled', 'must not be NULL');
    END IF;

    -- A concurrent jobs_unschedule can delete the row between the upsert that changed
    -- nothing and the read of its next run; then the next round inserts it again.
    LOOP
        INSERT INTO jobs_schedules AS s (name, cron, timezone, kind, payload, queue, priority, max_attempts,
                                         enabled, next_run_at)
        VALUES (jobs_schedule.name, jobs_schedule.cron, jobs_schedule.timezone, jobs_schedule.kind,
                jobs_schedule.payload, jobs_schedule.queue, jobs_schedule.priority, jobs_schedule.max_attempts,
                jobs_schedule.enabled, v_next)
        ON CONFLICT (name) DO UPDATE
        SET cron         = EXCLUDED.cron,
            timezone     = EXCLUDED.timezone,
            kind         = EXCLUDED.kind,
            payload      = EXCLUDED.payload,
            queue        = EXCLUDED.queue,
            priority     = EXCLUDED.priority,
            max_attempts = EXCLUDED.max_attempts,
            enabled      = EXCLUDED.enabled,
            -- Later than last_run_at in every branch (jobs_schedules_next_after_last).
            next_run_at  = CASE
                WHEN s.cron <> EXCLUDED.cron OR s.timezone <> EXCLUDED.timezone OR (NOT s.enabled AND EXCLUDED.enabled)
                THEN _jobs_cron_next('jobs_schedule', EXCLUDED.cron, greatest(clock_timestamp(), s.last_run_at), EXCLUDED.timezone)
                ELSE s.next_run_at
            END,
            updated_at   = now()
        WHERE (s.cron, s.timezone, s.kind, s.payload, s.queue, s.priority, s.max_attempts, s.enabled)
              IS DISTINCT FROM
              (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.payload, EXCLUDED.queue,
               EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.enabled)
        RETURNING s.next_run_at INTO v_next;
        IF FOUND THEN
            RETURN v_next;
        END IF;
        -- Unchanged: the row is locked (ON CONFLICT took the lock) and kept as it is.
        SELECT s.next_run_at INTO v_next
        FROM jobs_schedules s
        WHERE s.name = jobs_schedule.name;
        IF FOUND THEN
            RETURN v_next;
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION jobs_schedule(text, text, text, jsonb, text, text, integer, integer, boolean) IS
    'skiplock: creates or updates a named cron schedule and returns its next run time; the same arguments again change nothing.';
