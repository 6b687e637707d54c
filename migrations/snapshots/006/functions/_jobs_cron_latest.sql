-- _jobs_cron_latest: the latest instant of a cron expression in from..upto.
--
-- Promises: given from, itself an instant of the expression, and upto >= from, returns the
--           latest instant <= upto (from at worst). jobs_schedule_tick enqueues only this
--           one after downtime. Bisects from..upto: the latest instant lies in (lo, hi]
--           while there is an instant after lo that is <= upto, so halving until hi - lo is
--           at most a second (instants are whole seconds apart at least) and taking the
--           first instant after lo costs about log2((upto - from) / 1 s) jobs_cron_next
--           calls, 25 for a year, however many instants were missed.
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
    v_lo   timestamptz := _jobs_cron_latest."from";
    v_hi   timestamptz := _jobs_cron_latest.upto;
    v_mid  timestamptz;
    v_next timestamptz;
BEGIN
    v_next := _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron, v_lo, _jobs_cron_latest.timezone);
    IF v_next IS NULL OR v_next > _jobs_cron_latest.upto THEN
        RETURN _jobs_cron_latest."from";
    END IF;
    -- Invariant: the latest instant <= upto is in (v_lo, v_hi].
    WHILE v_hi - v_lo > interval '1 second' LOOP
        v_mid := v_lo + (v_hi - v_lo) / 2;
        v_next := _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron, v_mid, _jobs_cron_latest.timezone);
        IF v_next IS NOT NULL AND v_next <= _jobs_cron_latest.upto THEN
            v_lo := v_mid;
        ELSE
            v_hi := v_mid;
        END IF;
    END LOOP;
    -- (v_lo, v_hi] is at most a second long and holds the latest instant: the only one.
    RETURN _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron, v_lo, _jobs_cron_latest.timezone);
END;
$$;

COMMENT ON FUNCTION _jobs_cron_latest(text, text, text, timestamptz, timestamptz) IS
    'skiplock (private): the latest instant of a cron expression between an instant of it and a bound.';
