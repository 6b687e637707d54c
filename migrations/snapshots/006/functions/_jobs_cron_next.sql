-- _jobs_cron_next: jobs_cron_next's body, raising its errors in the name of func.
--
-- Promises: see jobs_cron_next. Searches local wall-clock dates from after's local date:
--           months that do not match are skipped whole, and within a matching day the
--           first hour and minute at or after the start are taken from the sorted field
--           values, so a call costs a few iterations per day searched. For an expression
--           whose minute or hour field starts with '*', a local time repeated at fall-back
--           also runs at its second occurrence: when the UTC offset changes within three
--           hours of after, the search starts three hours earlier so that the repeated
--           local times whose first occurrence is not later than after are seen, and it
--           returns the earlier of their first second occurrence later than after and the
--           first first-occurrence later than after. A repeated span longer than three
--           hours (a rare change of standard offset) may have its local times more than
--           three hours before after passed over at their second occurrence; Vixie cron
--           likewise treats only jumps of under three hours as DST.
-- Locks:    none. States: none.
-- Errors:   22023 naming cron (and the field), timezone or after; see jobs_cron_next.
CREATE OR REPLACE FUNCTION _jobs_cron_next(func text, cron text, after timestamptz, timezone text)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_spec     record;
    v_local    timestamp;
    v_day      date;
    v_last_day date;
    v_start    integer;
    v_hour     integer;
    v_minute   integer;
    v_dom_ok   boolean;
    v_dow_ok   boolean;
    v_instant  timestamptz;
    v_later    timestamptz;
    v_second   timestamptz;
    v_from     timestamptz := _jobs_cron_next.after;
BEGIN
    v_spec := _jobs_cron_parse(_jobs_cron_next.func, _jobs_cron_next.cron);
    PERFORM _jobs_cron_timezone(_jobs_cron_next.func, _jobs_cron_next.timezone);
    IF _jobs_cron_next.after IS NULL OR NOT isfinite(_jobs_cron_next.after) THEN
        PERFORM _jobs_invalid(_jobs_cron_next.func, 'after', 'must be a finite timestamp');
    END IF;
    -- Outside these bounds the search itself would leave the timestamp range.
    IF _jobs_cron_next.after < timestamptz '4000-01-01 00:00:00+00 BC'
       OR _jobs_cron_next.after >= timestamptz '294000-01-01 00:00:00+00' THEN
        RETURN NULL;
    END IF;

    IF v_spec.every_seconds IS NOT NULL THEN
        -- The instants of @every are the multiples of the step since 1970-01-01 00:00 UTC,
        -- whatever the time zone: a pure function of after, so that every ticker agrees.
        RETURN timestamptz 'epoch' + make_interval(secs =>
            ((floor(extract(epoch FROM _jobs_cron_next.after) / v_spec.every_seconds) + 1) * v_spec.every_seconds)::double precision);
    END IF;

    IF v_spec.time_wildcard
       AND ((_jobs_cron_next.after - interval '3 hours') AT TIME ZONE _jobs_cron_next.timezone)
           - ((_jobs_cron_next.after - interval '3 hours') AT TIME ZONE 'UTC')
           <> ((_jobs_cron_next.after + interval '3 hours') AT TIME ZONE _jobs_cron_next.timezone)
           - ((_jobs_cron_next.after + interval '3 hours') AT TIME ZONE 'UTC') THEN
        -- A transition nearby: a local time before after's may occur again after it.
        v_from := _jobs_cron_next.after - interval '3 hours';
    END IF;
    v_local := v_from AT TIME ZONE _jobs_cron_next.timezone;
    v_day := v_local::date;
    -- Minutes into the day of the first candidate: the whole minute after after's.
    v_start := extract(hour FROM v_local)::integer * 60 + extract(minute FROM v_local)::integer + 1;
    -- Every valid expression runs within 8 years (29 February: 2096, then 2104).
    v_last_day := least(v_day + 3660, date '294000-01-01');

    WHILE v_day <= v_last_day LOOP
        IF NOT extract(month FROM v_day)::integer = ANY (v_spec.months) THEN
            v_day := (date_trunc('month', v_day) + interval '1 month')::date;
            v_start := 0;
            CONTINUE;
        END IF;
        v_dom_ok := extract(day FROM v_day)::integer = ANY (v_spec.doms);
        v_dow_ok := extract(dow FROM v_day)::integer = ANY (v_spec.dows);
        -- When both day fields are restricted, a day matching either runs (crontab(5)).
        IF (v_spec.dom_restricted AND v_spec.dow_restricted AND (v_dom_ok OR v_dow_ok))
           OR (v_dom_ok AND v_dow_ok) THEN
            FOREACH v_hour IN ARRAY v_spec.hours LOOP
                CONTINUE WHEN (v_hour + 1) * 60 <= v_start;
                FOREACH v_minute IN ARRAY v_spec.minutes LOOP
                    CONTINUE WHEN v_hour * 60 + v_minute < v_start;
                    v_instant := _jobs_cron_instant(v_day + make_interval(hours => v_hour, mins => v_minute),
                                                    _jobs_cron_next.timezone);
                    -- Passed over here: the candidates before after (when the search
                    -- started three hours early) and a local time repeated at fall-back
                    -- whose first occurrence is not later than after.
                    IF v_instant > _jobs_cron_next.after THEN
                        -- A second occurrence seen is earlier than any local time after it.
                        RETURN least(v_instant, v_second);
                    END IF;
                    IF v_spec.time_wildcard AND v_second IS NULL THEN
                        -- AT TIME ZONE reads a repeated local time as its second occurrence.
                        v_later := (v_day + make_interval(hours => v_hour, mins => v_minute))
                                   AT TIME ZONE _jobs_cron_next.timezone;
                        IF v_later > _jobs_cron_next.after
                           AND (v_later AT TIME ZONE _jobs_cron_next.timezone) = v_day + make_interval(hours => v_hour, mins => v_minute) THEN
                            v_second := v_later;
                        END IF;
                    END IF;
                END LOOP;
            END LOOP;
        END IF;
        v_day := v_day + 1;
        v_start := 0;
    END LOOP;
    RETURN v_second;
END;
$$;

COMMENT ON FUNCTION _jobs_cron_next(text, text, timestamptz, text) IS
    'skiplock (private): jobs_cron_next, raising its errors in the name of the calling function.';
