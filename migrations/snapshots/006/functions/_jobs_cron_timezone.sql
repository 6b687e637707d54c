-- _jobs_cron_timezone: checks a time zone name for the cron functions.
--
-- Promises: returns nothing when PostgreSQL knows the zone (an IANA name such as
--           'Europe/Berlin', or anything else AT TIME ZONE accepts).
-- Locks:    none. States: none.
-- Errors:   22023 naming the parameter timezone, through _jobs_invalid, when it is NULL,
--           empty, over 200 bytes, or not a known time zone.
CREATE OR REPLACE FUNCTION _jobs_cron_timezone(func text, timezone text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF _jobs_cron_timezone.timezone IS NULL OR _jobs_cron_timezone.timezone = ''
       OR octet_length(_jobs_cron_timezone.timezone) > 200 THEN
        PERFORM _jobs_invalid(_jobs_cron_timezone.func, 'timezone', 'must be a time zone name such as ''Europe/Berlin''');
    END IF;
    BEGIN
        PERFORM timestamptz '2000-01-01 00:00:00+00' AT TIME ZONE _jobs_cron_timezone.timezone;
    EXCEPTION
        WHEN invalid_parameter_value OR feature_not_supported THEN
            PERFORM _jobs_invalid(_jobs_cron_timezone.func, 'timezone',
                format('%L is not a known time zone (use an IANA name such as ''Europe/Berlin'')', _jobs_cron_timezone.timezone));
    END;
END;
$$;

COMMENT ON FUNCTION _jobs_cron_timezone(text, text) IS
    'skiplock (private): raises 22023 naming timezone unless PostgreSQL knows the zone.';
