-- jobs_enqueue (proxy): adds a job on its queue's shard, or on its parents' shard, and
-- returns its id.
--
-- Promises: the shard's jobs_enqueue with the same arguments (notify included: the NOTIFY
--           goes out on the shard, where its workers LISTEN), run on the shard
--           _jobs_proxy_enqueue_shard picks. Without depends_on, that is the queue's shard
--           (_jobs_proxy_queue_shard, which pins a new queue to a shard in jobs_proxy_queues),
--           so a queue's jobs, unique keys (with on_duplicate and unique_for's periods) and
--           limits all live on one shard. With depends_on,
--           it is the parents' shard (id % 1024; they must all live on one), since a job's
--           dependencies are rows of one shard; a queue not yet pinned is pinned there. The id
--           carries that shard's number (id % 1024), so every later call for the job finds it.
--           The enqueue commits on the shard in a transaction of its own, whatever becomes of
--           the caller's transaction on the proxy: it is not atomic with the caller's other
--           writes (docs/scaling.md, "What changes"). Defaults (run_at now()) are evaluated
--           on the proxy.
-- Locks:    as the shard's jobs_enqueue; on the proxy, a new queue's jobs_proxy_queues row.
-- States:   creates a queued (or, with parents, waiting) job on the shard.
-- Errors:   22023 naming depends_on when the parents live on different shards, one names no
--           configured shard, or the queue is pinned to another shard than the parents'; the
--           shard's errors; when the shard is down, PL/Proxy's connection error naming the
--           shard's partition and connection string.
CREATE OR REPLACE FUNCTION jobs_enqueue(
    kind         text,
    payload      jsonb       DEFAULT '{}',
    queue        text        DEFAULT 'default',
    run_at       timestamptz DEFAULT now(),
    priority     integer     DEFAULT 0,
    max_attempts integer     DEFAULT 5,
    unique_key      text        DEFAULT NULL,
    concurrency_key text        DEFAULT NULL,
    meta            jsonb       DEFAULT NULL,
    notify          boolean     DEFAULT true,
    depends_on        bigint[]  DEFAULT NULL,
    on_parent_failure text      DEFAULT 'cancel',
    notify_finished   boolean   DEFAULT false,
    on_duplicate      text      DEFAULT 'keep',
    unique_for        interval  DEFAULT NULL
)
RETURNS bigint
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_enqueue_shard('jobs_enqueue', queue, depends_on);
$$;
