-- jobs_backoff: the delay before a failed job's next attempt.
--
-- Formula:  least(backoff_cap, backoff_base * 2^(attempt - 1)) * (1 + backoff_jitter * u),
--           u uniform in [-1, 1). With the defaults in jobs_settings (base 1 s, cap 1 h,
--           jitter 0.25) attempt 1 waits 0.75-1.25 s, attempt 5 waits 12-20 s, and no attempt
--           waits more than 1 h 15 min. The jitter spreads retries of jobs that failed
--           together (a downstream outage) so they do not come back as one burst.
-- Settings: read from the jobs_settings row on every call; UPDATE jobs_settings to change them.
-- Locks:    none. States: none.
-- Errors:   22023 when attempt is NULL or < 1.
CREATE OR REPLACE FUNCTION jobs_backoff(attempt integer)
RETURNS interval
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_settings jobs_settings;
    v_seconds  double precision;
BEGIN
    IF jobs_backoff.attempt IS NULL OR jobs_backoff.attempt < 1 THEN
        PERFORM _jobs_invalid('jobs_backoff', 'attempt', 'must be at least 1');
    END IF;

    SELECT * INTO v_settings FROM jobs_settings;

    -- Computed in float seconds: interval arithmetic overflows at 2^31 days, which a large
    -- base reaches within a few dozen attempts; the cap brings the value back into range.
    v_seconds := least(extract(epoch FROM v_settings.backoff_cap),
                       extract(epoch FROM v_settings.backoff_base)
                           * power(2::double precision, least(jobs_backoff.attempt - 1, 100)));

    RETURN make_interval(secs => v_seconds * (1 + v_settings.backoff_jitter * (2 * random() - 1)));
END;
$$;

COMMENT ON FUNCTION jobs_backoff(integer) IS
    'skiplock: retry delay after the given attempt: exponential from jobs_settings.backoff_base, capped at backoff_cap, with jitter of at most backoff_jitter (<= 25%).';
