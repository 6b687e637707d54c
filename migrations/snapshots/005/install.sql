-- skiplock SQL API: every function, in dependency order.
--
-- This is a tern code package: the single source of the current functions. Migrations
-- install frozen copies of it (migrations/snapshots/NNN, made with
-- `scripts/snapshot-sql NNN`), never this directory directly, so an old migration
-- always installs the functions it was written with.
--
-- Every function is created with SET search_path FROM CURRENT, pinning the install schema
-- (then pg_temp, last) as the search_path it runs with, whatever the caller's path. The
-- functions therefore find the jobs table in the install schema, and objects a caller
-- creates in other schemas (or pg_temp) cannot stand in for it. The public jobs_* functions
-- are SECURITY DEFINER: callers need EXECUTE on them (granted to the jobs_producer,
-- jobs_worker and jobs_admin roles by migration 003), not privileges on the tables. The pinned
-- search_path is what makes that safe; see docs/security.md.
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
{{ template "functions/jobs_get.sql" . }}
{{ template "functions/jobs_prune.sql" . }}

-- Nobody may call a function until a role is granted it (migration 003 and later): CREATE
-- FUNCTION grants EXECUTE to PUBLIC, and every connected user could then act with the
-- owner's rights. Revoked in the same transaction that creates the functions, so there is no
-- window. A function added above must be added here too (tests/security checks it).
REVOKE EXECUTE ON FUNCTION
    _jobs_invalid(text, text, text),
    _jobs_check_fence_arrays(text, bigint[], integer[]),
    jobs_backoff(integer),
    jobs_enqueue(text, jsonb, text, timestamptz, integer, integer, text),
    jobs_enqueue_many(text[], jsonb[], text[], timestamptz[], integer[], integer[], text[]),
    jobs_claim(text, integer, text[], interval),
    jobs_complete(bigint, integer),
    jobs_complete_many(bigint[], integer[]),
    jobs_fail(bigint, integer, text, timestamptz),
    jobs_heartbeat(bigint, integer, interval),
    jobs_heartbeat_many(bigint[], integer[], interval),
    jobs_snooze(bigint, integer, timestamptz),
    jobs_requeue_expired(),
    jobs_cancel(bigint),
    jobs_cancel(bigint, integer, text),
    jobs_retry(bigint),
    jobs_stats(),
    jobs_get(bigint),
    jobs_prune(interval, boolean, integer)
FROM PUBLIC;
