-- 005: jobs_claim, jobs_complete_many, jobs_heartbeat_many and jobs_requeue_expired lock
-- rows FOR NO KEY UPDATE (the lock their UPDATE takes anyway) instead of FOR UPDATE, so the
-- FOR KEY SHARE locks of inserts into tables with a foreign key to jobs neither hide jobs
-- from claims nor make completions wait. Same signatures, so CREATE OR REPLACE keeps their
-- grants.
--
-- Rewritten after release to install only what it changes (it used to reinstall every
-- function from a full copy of sql/); TestRewrittenMigrationsKeepTheirEffect proves the
-- schema it leaves is the same.
--
-- Append-only: never edit this file once released.

{{ template "snapshots/004/search_path.sql" . }}
{{ template "snapshots/005/functions/jobs_claim.sql" . }}
{{ template "snapshots/005/functions/jobs_complete_many.sql" . }}
{{ template "snapshots/005/functions/jobs_heartbeat_many.sql" . }}
{{ template "snapshots/005/functions/jobs_requeue_expired.sql" . }}
{{ template "snapshots/004/grants.sql" . }}
