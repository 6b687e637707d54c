-- _jobs_cron_parse: parses a cron expression (see jobs_cron_next for the syntax).
--
-- Promises: for a five-field expression or a macro, returns the sorted values of each field
--           (dows with 7 folded into 0, Sunday) and whether the day-of-month and day-of-week
--           fields are restricted (do not start with '*'), which decides the either-day rule,
--           and whether the minute or hour field starts with '*' (time_wildcard: such an
--           expression runs in both occurrences of a local time repeated at fall-back, as in
--           Vixie cron; @hourly is one); every_seconds is NULL. For '@every <interval>' returns every_seconds only.
-- Locks:    none. States: none.
-- Errors:   22023 naming the parameter cron (and the field, for a five-field expression),
--           through _jobs_invalid, for NULL, empty or over 1000 bytes, an unknown macro, a
--           count of fields other than five, a bad field (see _jobs_cron_field), or an @every
--           interval that is not a whole number of seconds from 1 second on, or has months or
--           years (their length varies).
-- Settings: IntervalStyle is pinned to 'postgres': it changes how an @every interval is read
--           ('-1 30:00:00' is 6 hours under 'postgres', -54 hours under 'sql_standard') and
--           how the error message writes it, and the result must be the same for every
--           caller (the function is IMMUTABLE).
CREATE OR REPLACE FUNCTION _jobs_cron_parse(
    func               text,
    cron               text,
    OUT minutes        integer[],
    OUT hours          integer[],
    OUT doms           integer[],
    OUT months         integer[],
    OUT dows           integer[],
    OUT dom_restricted boolean,
    OUT dow_restricted boolean,
    OUT time_wildcard  boolean,
    OUT every_seconds  bigint
)
LANGUAGE plpgsql
IMMUTABLE
SET search_path FROM CURRENT
SET IntervalStyle = 'postgres'
AS $$
#variable_conflict use_column
DECLARE
    v_expr     text;
    v_fields   text[];
    v_interval interval;
    v_seconds  numeric;
BEGIN
    IF _jobs_cron_parse.cron IS NULL OR btrim(_jobs_cron_parse.cron) = '' OR octet_length(_jobs_cron_parse.cron) > 1000 THEN
        PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron', 'must be a cron expression of at most 1000 bytes');
    END IF;
    v_expr := btrim(_jobs_cron_parse.cron, E' \t\n\r');

    IF lower(v_expr) ~ '^@every\s' THEN
        BEGIN
            v_interval := btrim(substr(v_expr, 7), E' \t\n\r')::interval;
        EXCEPTION
            WHEN data_exception THEN
                PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
                    format('@every: %L is not an interval', btrim(substr(v_expr, 7), E' \t\n\r')));
        END;
        v_seconds := extract(epoch FROM v_interval);
        IF extract(year FROM v_interval) <> 0 OR extract(month FROM v_interval) <> 0
           OR v_seconds < 1 OR v_seconds <> trunc(v_seconds) OR v_seconds > 3162240000 THEN
            PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
                format('@every: %L must be a whole number of seconds from 1 second to 100 years, without months or years', v_interval));
        END IF;
        every_seconds := v_seconds::bigint;
        RETURN;
    END IF;

    IF left(v_expr, 1) = '@' THEN
        v_expr := CASE lower(v_expr)
            WHEN '@yearly'   THEN '0 0 1 1 *'
            WHEN '@annually' THEN '0 0 1 1 *'
            WHEN '@monthly'  THEN '0 0 1 * *'
            WHEN '@weekly'   THEN '0 0 * * 0'
            WHEN '@daily'    THEN '0 0 * * *'
            WHEN '@midnight' THEN '0 0 * * *'
            WHEN '@hourly'   THEN '0 * * * *'
        END;
        IF v_expr IS NULL THEN
            PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
                format('%L is not a macro (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every <interval>)',
                       _jobs_cron_parse.cron));
        END IF;
    END IF;

    v_fields := regexp_split_to_array(v_expr, '\s+');
    IF cardinality(v_fields) <> 5 THEN
        PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
            format('must have 5 fields (minute hour day-of-month month day-of-week), got %s in %L',
                   cardinality(v_fields), _jobs_cron_parse.cron));
    END IF;

    minutes := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'minute', v_fields[1], 0, 59, NULL, 0, 59);
    hours := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'hour', v_fields[2], 0, 23, NULL, 0, 23);
    doms := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'day-of-month', v_fields[3], 1, 31, NULL, 0, 31);
    months := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'month', v_fields[4], 1, 12,
        '{JAN,FEB,MAR,APR,MAY,JUN,JUL,AUG,SEP,OCT,NOV,DEC}', 1, 12);
    -- 0 and 7 are both Sunday; '*' and 'a/step' end at 6, so '5/2' is Friday only.
    dows := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'day-of-week', v_fields[5], 0, 7,
        '{SUN,MON,TUE,WED,THU,FRI,SAT}', 0, 6);
    dows := ARRAY(SELECT DISTINCT d % 7 FROM unnest(dows) AS d ORDER BY 1);
    -- crontab(5): a day field is restricted unless it starts with '*' (so '*/2' is not).
    dom_restricted := left(v_fields[3], 1) <> '*';
    dow_restricted := left(v_fields[5], 1) <> '*';
    -- Vixie cron's MIN_STAR and HR_STAR: '*/15' counts, '0-59' does not.
    time_wildcard := left(v_fields[1], 1) = '*' OR left(v_fields[2], 1) = '*';
END;
$$;

COMMENT ON FUNCTION _jobs_cron_parse(text, text) IS
    'skiplock (private): parses a cron expression into the values of its fields, or an @every step.';
