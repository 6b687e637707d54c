-- _jobs_cron_latest: the latest instant of a cron expression in from..upto.
--
-- Promises: given from, itself an instant of the expression, and upto >= from, returns the
--           latest instant <= upto (from at worst). jobs_schedule_tick enqueues only this
--           one after downtime. Looks back 1, 2, 4... minutes from upto for a window with an
--           instant, then walks forward through it, so a long downtime costs a few dozen
--           jobs_cron_next calls rather than one per missed instant.
-- Locks:    none. States: none.
-- Errors:   those of _jobs_cron_next (none for a stored schedule).
CREATE OR REPLACE FUNCTION _jobs_cron_latest(func text, cron text, timezone text, "from" timestamptz, upto timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_window  interval := interval '1 minute';
    v_instant timestamptz;
    v_next    timestamptz;
BEGIN
    LOOP
        IF _jobs_cron_latest.upto - v_window <= _jobs_cron_latest."from" THEN
            v_instant := _jobs_cron_latest."from";
            EXIT;
        END IF;
        v_instant := _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron,
                                     _jobs_cron_latest.upto - v_window, _jobs_cron_latest.timezone);
        EXIT WHEN v_instant <= _jobs_cron_latest.upto;
        v_window := v_window * 2;
    END LOOP;
    LOOP
        v_next := _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron, v_instant, _jobs_cron_latest.timezone);
        EXIT WHEN v_next IS NULL OR v_next > _jobs_cron_latest.upto;
        v_instant := v_next;
    END LOOP;
    RETURN v_instant;
END;
$$;

COMMENT ON FUNCTION _jobs_cron_latest(text, text, text, timestamptz, timestamptz) IS
    'skiplock (private): the latest instant of a cron expression between an instant of it and a bound.';
