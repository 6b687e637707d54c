-- jobs_cron_next: the first instant after `after` at which a cron expression runs.
--
-- Promises: a pure function of its arguments and the time zone database: the earliest
--           instant strictly later than after, or NULL when there is none within ten years
--           (or within the supported range, 4000 BC to 294000 AD).
--           Syntax: five fields, minute (0-59) hour (0-23) day-of-month (1-31) month (1-12
--           or JAN-DEC) day-of-week (0-7 or SUN-SAT, 0 and 7 both Sunday), each '*', a
--           value, a range 'a-b', a list 'a,b-c', with an optional step ('*/15', '1-30/2',
--           '5/10' = 5-59/10). When both day fields are restricted (neither starts with
--           '*'), a day matching either runs; otherwise both must match. Macros: @yearly
--           (@annually), @monthly, @weekly, @daily (@midnight), @hourly. '@every <interval>'
--           (e.g. '@every 30 seconds', '@every 1h30m') runs at the multiples of the interval
--           since 1970-01-01 00:00 UTC, ignoring timezone; the interval is a whole number of
--           seconds, at least 1, without months or years.
--           Five-field expressions match local wall-clock time in timezone (an IANA name).
--           A local time the clocks skip runs when they jump (a daily 02:30 runs at 03:00 on
--           America/New_York's spring-forward day); a local time that occurs twice runs at
--           its first occurrence only (a daily 02:30 runs once, at 02:30 CEST, on
--           Europe/Berlin's fall-back day), unless the minute or hour field starts with '*'
--           (e.g. '*/15 * * * *', '0 * * * *', @hourly): such an expression runs in both
--           occurrences (Vixie cron's rules: fixed times once, wildcard times in both).
--           Time zone names are read with timezone_abbreviations = 'Default' whatever the
--           session's setting, so an abbreviation such as 'IST' means the same to every
--           caller (prefer IANA names: abbreviations have no DST).
-- Locks:    none. States: none. Grants: every role (it reads no table).
-- Errors:   22023 naming cron and the offending field (e.g. 'field hour: 24 is out of range
--           0-23'), timezone when it is not a known zone, or after when it is NULL or
--           infinite.
CREATE OR REPLACE FUNCTION jobs_cron_next(cron text, after timestamptz, timezone text DEFAULT 'UTC')
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
SET timezone_abbreviations = 'Default'
AS $$
#variable_conflict use_column
BEGIN
    RETURN _jobs_cron_next('jobs_cron_next', jobs_cron_next.cron, jobs_cron_next.after, jobs_cron_next.timezone);
END;
$$;

COMMENT ON FUNCTION jobs_cron_next(text, timestamptz, text) IS
    'skiplock: the first instant after `after` at which a cron expression runs in a time zone.';
