-- 018: jobs_enqueue and jobs_enqueue_many take a last argument notify boolean DEFAULT true;
-- false sends no NOTIFY, so the enqueuing commit skips PostgreSQL's cluster-wide NOTIFY lock
-- (which serialises notifying commits across the WAL flush). jobs_notify(queue) is new: the
-- standalone wake-up a caller sends after such enqueues committed (the Go driver's notify
-- throttle does, once per cooldown window). Every call by name or with up to nine positional
-- arguments works as before. CREATE OR REPLACE cannot add an argument, so the old functions
-- are dropped first (hand-written, above the generated lines); grants.sql, applied last,
-- gives the new ones back to jobs_producer.
--
-- Append-only: never edit this file once released.

DROP FUNCTION IF EXISTS jobs_enqueue(text, jsonb, text, timestamptz, integer, integer, text, text, jsonb);
DROP FUNCTION IF EXISTS jobs_enqueue_many(text[], jsonb[], text[], timestamptz[], integer[], integer[], text[], text[], jsonb[]);

{{ template "snapshots/004/search_path.sql" . }}
{{ template "snapshots/018/functions/jobs_enqueue.sql" . }}
{{ template "snapshots/018/functions/jobs_enqueue_many.sql" . }}
{{ template "snapshots/018/functions/jobs_notify.sql" . }}
{{ template "snapshots/018/grants.sql" . }}
