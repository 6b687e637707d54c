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
-- Routing counts the shards from jobs_proxy_cluster_changes: a transaction that started
-- before shards were added (or up to a second after the change) keeps the count before,
-- because PL/Proxy reloads its cluster only at the start of a transaction, and modular mapping
-- sent the new shards' ids and queues to old shards in between.
-- _jobs_proxy_unreachable counts only PL/Proxy's connection errors as a shard being down, not
-- its other errors (a shard whose functions do not match was skipped with only a WARNING).
--
-- Append-only: never edit this file once released.

{{ template "snapshots/001/search_path.sql" . }}

CREATE TABLE jobs_proxy_cluster_changes (
    changed_at timestamptz PRIMARY KEY,
    shards     integer NOT NULL CONSTRAINT jobs_proxy_cluster_changes_shards_valid CHECK (shards BETWEEN 1 AND 1024)
);
-- The configuration in place holds for every transaction.
INSERT INTO jobs_proxy_cluster_changes (changed_at, shards)
SELECT '-infinity', c.shards FROM jobs_proxy_cluster c WHERE c.shards > 0;

COMMENT ON TABLE jobs_proxy_cluster_changes IS
    'skiplock proxy: each change of the shard count by jobs_proxy_set_shards and when it was made (the first at -infinity); routing uses the newest one at least a second older than the transaction.';

{{ template "snapshots/002/functions/_jobs_proxy_shard_count.sql" . }}
{{ template "snapshots/002/functions/_jobs_proxy_unreachable.sql" . }}
{{ template "snapshots/002/functions/_jobs_proxy_queues_on.sql" . }}
{{ template "snapshots/002/functions/jobs_proxy_set_shards.sql" . }}
{{ template "snapshots/002/functions/jobs_claim.sql" . }}
{{ template "snapshots/002/functions/jobs_metrics.sql" . }}
{{ template "snapshots/002/grants.sql" . }}
