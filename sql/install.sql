-- skiplock SQL API: every function, in dependency order.
--
-- This is a tern code package: the single source of the current functions. Migrations
-- install frozen copies of it (migrations/snapshots/NNN, made with
-- `go run github.com/jackc/tern/v2@v2.3.4 code snapshot sql -m migrations`), never this directory directly, so an old migration
-- always installs the functions it was written with.
--
-- Every function is created with SET search_path FROM CURRENT, pinning the install schema
-- (then pg_temp, last) as the search_path it runs with, whatever the caller's path. The
-- functions therefore find the jobs table in the install schema, and objects a caller
-- creates in other schemas (or pg_temp) cannot stand in for it.
DO $$
BEGIN
    IF current_schema() IS NULL THEN
        RAISE EXCEPTION 'skiplock: no schema to install into: search_path names no existing schema';
    END IF;
    PERFORM set_config('search_path', format('%I, pg_temp', current_schema()), true);
END;
$$;

{{ template "functions/_jobs_invalid.sql" . }}
{{ template "functions/_jobs_check_fence_arrays.sql" . }}
{{ template "functions/jobs_backoff.sql" . }}
{{ template "functions/jobs_enqueue.sql" . }}
{{ template "functions/jobs_enqueue_many.sql" . }}
{{ template "functions/jobs_claim.sql" . }}
{{ template "functions/jobs_complete.sql" . }}
{{ template "functions/jobs_complete_many.sql" . }}
{{ template "functions/jobs_fail.sql" . }}
{{ template "functions/jobs_heartbeat.sql" . }}
{{ template "functions/jobs_heartbeat_many.sql" . }}
{{ template "functions/jobs_snooze.sql" . }}
{{ template "functions/jobs_requeue_expired.sql" . }}
{{ template "functions/jobs_cancel.sql" . }}
{{ template "functions/jobs_retry.sql" . }}
{{ template "functions/jobs_stats.sql" . }}
{{ template "functions/jobs_prune.sql" . }}
