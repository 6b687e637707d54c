-- _jobs_proxy_enqueue_many_on: the shard's jobs_enqueue_many, run on the given shard.
--
-- Promises: the shard's jobs_enqueue_many with the same arrays, on shard `shard`, in a
--           transaction of its own there; returns its ids in its order.
-- Locks:    as the shard's function. States: creates queued jobs on the shard.
-- Errors:   22023 naming shard when it is not configured; the shard's errors.
CREATE OR REPLACE FUNCTION _jobs_proxy_enqueue_many_on(
    shard            integer,
    kinds            text[],
    payloads         jsonb[],
    queues           text[],
    run_ats          timestamptz[],
    priorities       integer[],
    max_attempts     integer[],
    unique_keys      text[],
    concurrency_keys text[],
    metas            jsonb[],
    notify           boolean,
    on_duplicates    text[],
    unique_fors      interval[]
)
RETURNS SETOF bigint
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON _jobs_proxy_check_shard('jobs_enqueue_many', shard);
    SELECT * FROM jobs_enqueue_many(kinds, payloads, queues, run_ats, priorities, max_attempts,
                                    unique_keys, concurrency_keys, metas, notify, on_duplicates, unique_fors);
$$;

COMMENT ON FUNCTION _jobs_proxy_enqueue_many_on(integer, text[], jsonb[], text[], timestamptz[], integer[], integer[], text[], text[], jsonb[], boolean,
                                                text[], interval[]) IS
    'skiplock proxy (private): jobs_enqueue_many on one shard.';
