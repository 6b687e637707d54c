-- _jobs_errors_append: a job's errors history with one more entry, keeping the newest 100.
--
-- Promises: returns errors || entry when errors has fewer than 100 entries; otherwise the
--           newest 99 entries of errors, then entry. So the history of a job that fails
--           forever (max_attempts up to 2147483647, snoozes, expired leases) stays bounded:
--           unbounded, it would reach jsonb's limit of 268435455 bytes (about 26,700 entries
--           with 10000-character errors), and from then on every jobs_fail of the job, and
--           every jobs_requeue_expired batch holding it, would raise 54000; and each failure
--           would rewrite the whole history long before that.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_errors_append(errors jsonb, entry jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
SET search_path FROM CURRENT
AS $$
    SELECT CASE WHEN jsonb_array_length(_jobs_errors_append.errors) < 100
                THEN _jobs_errors_append.errors || _jobs_errors_append.entry
                ELSE jsonb_path_query_array(_jobs_errors_append.errors, '$[$from to last]',
                                            jsonb_build_object('from', jsonb_array_length(_jobs_errors_append.errors) - 99))
                     || _jobs_errors_append.entry
           END
$$;

COMMENT ON FUNCTION _jobs_errors_append(jsonb, jsonb) IS
    'skiplock (private): appends an entry to a job''s errors history, keeping the newest 100 entries.';
