-- jobs_settings holds the retry backoff that jobs_backoff and jobs_fail read on every call:
-- least(cap, base * 2^(attempt - 1)) times a jitter factor in [1 - jitter, 1 + jitter).
-- The jitter is random, so delays are checked against their bounds over many samples,
-- except with jitter 0, where they are exact. Samples call jobs_backoff in a select list,
-- where a volatile function runs once per row.
\set VERBOSITY terse

-- the defaults: base 1 s, cap 1 h, jitter 0.25
SELECT * FROM jobs_settings;

-- every sample of attempts 1 to 12 lies within base * 2^(attempt - 1) +/- 25%
SELECT bool_and(d >= interval '1 second' * 2 ^ (a - 1) * 0.75
                AND d <= interval '1 second' * 2 ^ (a - 1) * 1.25) AS within_bounds,
       count(*) AS samples
FROM (SELECT a, jobs_backoff(a) AS d FROM generate_series(1, 12) AS a, generate_series(1, 200) AS n) AS s;
-- from attempt 13 (2^12 s > 1 h) on, the cap applies: 45 to 75 minutes, however large the attempt
SELECT a, bool_and(d >= interval '45 minutes' AND d <= interval '75 minutes') AS capped
FROM (SELECT a, jobs_backoff(a) AS d
      FROM unnest(ARRAY[13, 14, 20, 100, 1000, 2147483647]) AS a, generate_series(1, 200) AS n) AS s
GROUP BY a ORDER BY a;
-- the jitter really varies the delay, both ways
SELECT count(DISTINCT d) > 100 AS varied,
       min(d) < interval '8 seconds' AND max(d) > interval '8 seconds' AS both_ways
FROM (SELECT jobs_backoff(4) AS d FROM generate_series(1, 200) AS n) AS s;

-- jitter 0: exact powers of two up to the cap
UPDATE jobs_settings SET backoff_jitter = 0;
SELECT a, jobs_backoff(a) AS delay FROM generate_series(1, 14) AS a;

-- changing base and cap takes effect at once, without reinstalling anything
UPDATE jobs_settings SET backoff_base = '10 seconds', backoff_cap = '1 minute';
SELECT a, jobs_backoff(a) AS delay FROM generate_series(1, 5) AS a;
UPDATE jobs_settings SET backoff_jitter = 0.1;
SELECT bool_and(d >= interval '36 seconds' AND d <= interval '44 seconds') AS attempt_3_within_10pct,
       min(d) < interval '40 seconds' AND max(d) > interval '40 seconds' AS both_ways
FROM (SELECT jobs_backoff(3) AS d FROM generate_series(1, 200) AS n) AS s;

-- jobs_fail without retry_at schedules the retry with these settings (each check is rolled
-- back, and the job retried at once instead, to reach the next attempt)
UPDATE jobs_settings SET backoff_base = '1 hour', backoff_cap = '1 day', backoff_jitter = 0;
SELECT jobs_enqueue('flaky') AS flaky \gset
SELECT attempt FROM jobs_claim('w');
BEGIN;
SELECT jobs_fail(:flaky, 1, 'boom') AS state;
SELECT run_at - now() AS retry_in FROM jobs WHERE id = :flaky;
ROLLBACK;
SELECT jobs_fail(:flaky, 1, 'boom', retry_at => now()) AS state;
SELECT attempt FROM jobs_claim('w');
BEGIN;
SELECT jobs_fail(:flaky, 2, 'boom') AS state;
SELECT run_at - now() AS retry_in FROM jobs WHERE id = :flaky;
ROLLBACK;

-- the settings are checked: base > 0, cap >= base, 0 <= jitter <= 0.25, one row only
UPDATE jobs_settings SET backoff_base = '0';
UPDATE jobs_settings SET backoff_base = '-1 second';
UPDATE jobs_settings SET backoff_cap = '30 minutes';
UPDATE jobs_settings SET backoff_jitter = 0.3;
UPDATE jobs_settings SET backoff_jitter = -0.1;
INSERT INTO jobs_settings DEFAULT VALUES;
INSERT INTO jobs_settings (singleton) VALUES (false);
SELECT * FROM jobs_settings;
-- the bounds themselves are accepted
UPDATE jobs_settings SET backoff_base = '1 microsecond', backoff_cap = '1 microsecond', backoff_jitter = 0.25;
SELECT bool_and(d >= interval '0' AND d <= interval '2 microseconds') AS tiny
FROM (SELECT jobs_backoff(a) AS d FROM generate_series(1, 20) AS a) AS s;

-- back to the defaults
UPDATE jobs_settings SET backoff_base = DEFAULT, backoff_cap = DEFAULT, backoff_jitter = DEFAULT;
SELECT * FROM jobs_settings;
