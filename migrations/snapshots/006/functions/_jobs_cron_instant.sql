-- _jobs_cron_instant: the instant a cron run at a local wall-clock time happens.
--
-- Promises: for a local time that occurs once, that instant. For a local time the clocks
--           skip (spring forward), the instant the clocks jump, i.e. the first existing
--           local minute after it: a daily 02:30 job in America/New_York runs at 03:00 EDT on
--           that day. For a local time that occurs twice (fall back), its first occurrence
--           (daylight time): the daily 02:30 job in Europe/Berlin runs at 02:30 CEST, not
--           again at 02:30 CET. Vixie cron's rules for fixed-time jobs; _jobs_cron_next adds
--           the second occurrence for wildcard ones. Non-decreasing in local, so the earliest
--           local match after a point gives the earliest first occurrence.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_cron_instant(local timestamp, timezone text)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_local   timestamp := _jobs_cron_instant.local;
    v_instant timestamptz;
    v_earlier timestamptz;
    v_before  timestamptz;
BEGIN
    -- AT TIME ZONE reads a skipped time with the offset before the jump (02:30 -> 03:30
    -- EDT) and a repeated time as its second, standard-time occurrence.
    v_instant := v_local AT TIME ZONE _jobs_cron_instant.timezone;
    IF (v_instant AT TIME ZONE _jobs_cron_instant.timezone) <> v_local THEN
        -- Skipped: walk to the first local minute that exists (at most the jump's length;
        -- bounded by two days for zones that skipped a whole date).
        FOR v_i IN 1 .. 2880 LOOP
            v_local := v_local + interval '1 minute';
            v_instant := v_local AT TIME ZONE _jobs_cron_instant.timezone;
            EXIT WHEN (v_instant AT TIME ZONE _jobs_cron_instant.timezone) = v_local;
        END LOOP;
        RETURN v_instant;
    END IF;
    -- Repeated: the same local time read with the offset in force three hours earlier
    -- (before any fall-back that v_instant follows; transitions are further apart).
    v_before := v_instant - interval '3 hours';
    v_earlier := (v_local - ((v_before AT TIME ZONE _jobs_cron_instant.timezone) - (v_before AT TIME ZONE 'UTC')))
                 AT TIME ZONE 'UTC';
    IF v_earlier < v_instant AND (v_earlier AT TIME ZONE _jobs_cron_instant.timezone) = v_local THEN
        RETURN v_earlier;
    END IF;
    RETURN v_instant;
END;
$$;

COMMENT ON FUNCTION _jobs_cron_instant(timestamp, text) IS
    'skiplock (private): the instant of a cron run at a local time (skipped times at the jump, repeated times at their first occurrence).';
