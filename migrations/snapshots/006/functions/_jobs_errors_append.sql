-- _jobs_errors_append: a job's errors history with one entry more, capped.
--
-- Promises: returns errors with entry appended. The history keeps at most 100 entries: once
--           it is full, the first entry (the job's first failure) and the newest 99 are kept
--           and the ones between are dropped. Each entry keeps its "attempt", so a gap shows
--           where entries were dropped. So the history of a job that fails forever
--           (max_attempts up to 2147483647, snoozes, expired leases) stays bounded: unbounded,
--           it would reach jsonb's limit of 268435455 bytes (about 26,700 entries with
--           10000-character errors), and from then on every jobs_fail of the job, and every
--           jobs_requeue_expired batch holding it, would raise 54000; and each failure would
--           rewrite the whole history long before that. Every function that appends to errors
--           (jobs_fail, the worker's jobs_cancel, jobs_requeue_expired, the claims when a job
--           has no attempt left) goes through it.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_errors_append(errors jsonb, entry jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
SET search_path FROM CURRENT
AS $$
    SELECT CASE
        WHEN jsonb_array_length(_jobs_errors_append.errors) < 100
            THEN _jobs_errors_append.errors || jsonb_build_array(_jobs_errors_append.entry)
        -- the first, the newest 98 already there, and the new one: 100
        ELSE jsonb_build_array(_jobs_errors_append.errors -> 0)
             || jsonb_path_query_array(_jobs_errors_append.errors, '$[last - 97 to last]')
             || jsonb_build_array(_jobs_errors_append.entry)
    END;
$$;

COMMENT ON FUNCTION _jobs_errors_append(jsonb, jsonb) IS
    'skiplock (private): appends an entry to a job''s errors history, keeping the first entry and the newest 99.';
