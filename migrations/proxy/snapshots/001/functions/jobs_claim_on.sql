-- jobs_claim_on (proxy): leases up to max_jobs ready jobs of one named shard to a worker.
--
-- Promises: the shard's jobs_claim(worker, max_jobs, queues, lease) run on shard `shard`
--           and committed there in a transaction of its own; every promise of jobs_claim
--           holds on that shard (no two callers get the same job; each claimed job's attempt
--           is its fencing token, and the id carries the shard, so completing it through the
--           proxy reaches the same shard). For workers that spread their own polls over the
--           shards; jobs_claim does that for them.
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
    SELECT * FROM jobs_claim(worker, max_jobs, queues, lease);
$$;
