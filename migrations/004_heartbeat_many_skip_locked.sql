-- 004: jobs_heartbeat_many no longer waits for row locks held by other sessions, and says
-- which leases it extended: it returns TABLE (id bigint, extended boolean) instead of
-- SETOF bigint. CREATE OR REPLACE cannot change a function's result type, so the old
-- function is dropped first (hand-written, above the generated lines); grants.sql, applied
-- last, gives the new one back to jobs_worker. This migration also freezes the first copies
-- of the search_path preamble and of grants.sql, which every later migration re-applies.
--
-- Rewritten after release to install only what it changes (it used to reinstall every
-- function from a full copy of sql/); TestRewrittenMigrationsKeepTheirEffect proves the
-- schema it leaves is the same.
--
-- Append-only: never edit this file once released.

DROP FUNCTION IF EXISTS jobs_heartbeat_many(bigint[], integer[], interval);

{{ template "snapshots/004/search_path.sql" . }}
{{ template "snapshots/004/functions/jobs_heartbeat_many.sql" . }}
{{ template "snapshots/004/grants.sql" . }}
