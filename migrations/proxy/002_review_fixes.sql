-- proxy 002 (review of issue 14): jobs_claim refuses queues with a NULL element before it
-- asks any shard (with queues on several shards, the NULL reached only shard 0, after other
-- shards had claimed jobs that the error then left running until their leases expired), and
-- returns, with a WARNING, the jobs already claimed when a later shard fails for another
-- reason than being unreachable (it raised, handing nobody jobs claimed on other shards);
-- jobs_proxy_set_shards refuses a connection string that carries a password (every login of
-- the proxy can read pg_foreign_server.srvoptions; passwords go in user mappings) and, before
-- it adds shards, pins the queues that have jobs on the shards but no row in
-- jobs_proxy_queues (_jobs_proxy_queues_on), so that they do not move away from their jobs.
-- jobs_metrics gives a queue with jobs on several shards one merged row, not one per shard.
--
-- Append-only: never edit this file once released.

{{ template "snapshots/001/search_path.sql" . }}

{{ template "snapshots/002/functions/_jobs_proxy_queues_on.sql" . }}
{{ template "snapshots/002/functions/jobs_proxy_set_shards.sql" . }}
{{ template "snapshots/002/functions/jobs_claim.sql" . }}
{{ template "snapshots/002/functions/jobs_metrics.sql" . }}
{{ template "snapshots/002/grants.sql" . }}
