-- _jobs_proxy_enqueue_shard: the shard a new job goes to (the RUN ON of jobs_enqueue).
--
-- Promises: without parents (depends_on NULL, empty or only NULLs), the queue's shard
--           (_jobs_proxy_queue_shard, pinning a new queue). With parents, their shard:
--           dependencies are rows of one shard (the child is released in the transaction
--           that finishes its last parent), so a job lives on its parents' shard, found from
--           their ids alone (id % 1024, _jobs_proxy_id_shard). The parents' shard wins over
--           the queue's hash: a queue not yet pinned is pinned there (_jobs_proxy_queue_pin).
--           NULL elements are left to the shard, which refuses them with its own 22023.
-- Locks:    a new jobs_proxy_queues row, as _jobs_proxy_queue_shard.
-- States:   none of the jobs.
-- Errors:   22023 naming depends_on when an id names no configured shard, when the parents
--           live on different shards, or when the queue is pinned to another shard than the
--           parents'; 22023 naming queue when the proxy has no shards.
CREATE OR REPLACE FUNCTION _jobs_proxy_enqueue_shard(func text, queue text, depends_on bigint[])
RETURNS integer
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_shards integer[];
    v_shard integer;
BEGIN
    -- One id per shard named is enough to check that shard (the shard count is read once per
    -- shard, not once per parent).
    v_shards := ARRAY(SELECT _jobs_proxy_id_shard(_jobs_proxy_enqueue_shard.func, 'depends_on', p.id)
                      FROM (SELECT min(d) AS id
                            FROM unnest(_jobs_proxy_enqueue_shard.depends_on) AS d
                            WHERE d IS NOT NULL
                            GROUP BY d % 1024) AS p
                      ORDER BY 1);
    IF cardinality(v_shards) = 0 THEN
        RETURN _jobs_proxy_queue_shard(_jobs_proxy_enqueue_shard.func, _jobs_proxy_enqueue_shard.queue, true);
    END IF;
    IF cardinality(v_shards) > 1 THEN
        PERFORM _jobs_invalid(_jobs_proxy_enqueue_shard.func, 'depends_on',
            format('names jobs of shards %s: a job and its parents must live on one shard',
                   array_to_string(v_shards, ', ')));
    END IF;
    v_shard := _jobs_proxy_queue_pin(_jobs_proxy_enqueue_shard.func, _jobs_proxy_enqueue_shard.queue, v_shards[1]);
    IF v_shard <> v_shards[1] THEN
        PERFORM _jobs_invalid(_jobs_proxy_enqueue_shard.func, 'depends_on',
            format('names jobs of shard %s, but queue %s lives on shard %s (jobs_proxy_queues): a job lives on its parents'' shard, so its queue must live there too',
                   v_shards[1], quote_literal(_jobs_proxy_enqueue_shard.queue), v_shard));
    END IF;
    RETURN v_shards[1];
END;
$$;

COMMENT ON FUNCTION _jobs_proxy_enqueue_shard(text, text, bigint[]) IS
    'skiplock proxy (private): the shard of a new job: its parents'' (one shard, pinning the queue there) or its queue''s.';
