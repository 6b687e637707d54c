-- jobs_claim_on (proxy): leases up to max_jobs ready jobs of one named shard to a worker.
--
-- Promises: the shard's jobs_claim(worker, max_jobs, queues, lease) run on shard `shard`
--           and committed there in a transaction of its own; every promise of jobs_claim
--           holds on that shard (no two callers get the same job; each claimed job's attempt
--           is its fencing token, and the id carries the shard, so completing it through the
--           proxy reaches the same shard). For workers that spread their own polls over the
--           shards; jobs_claim does that for them. It asks the shard for jobs_claimed's
--           columns by name, not SELECT *: PL/Proxy refuses a row with more fields than the
--           proxy's type ("Got too many fields"), so a shard upgraded to a release whose
--           jobs_claimed has more columns keeps serving this proxy until it is upgraded too.
-- Locks:    as the shard's jobs_claim, until that call ends: the rows are unlocked when
--           jobs_claim_on returns, whatever the caller's transaction on the proxy does.
-- States:   queued -> running on that shard.
-- Errors:   22023 naming shard when it is NULL or not configured; jobs_claim's errors; when
--           the shard is down, PL/Proxy's connection error naming it.
CREATE OR REPLACE FUNCTION jobs_claim_on(
    shard    integer,
    worker   text,
    max_jobs integer  DEFAULT 1,
    queues   text[]   DEFAULT NULL,
    lease    interval DEFAULT '5 minutes'
)
RETURNS SETOF jobs_claimed
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_check_shard('jobs_claim_on', shard);
    SELECT id, queue, kind, payload, attempt, max_attempts, priority, run_at, lease_expires_at,
           created_at, meta, parent_results, checkpoints
    FROM jobs_claim(worker, max_jobs, queues, lease);
$$;
