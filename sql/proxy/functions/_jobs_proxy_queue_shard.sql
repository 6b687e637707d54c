-- _jobs_proxy_queue_shard: the shard a queue lives on (the RUN ON of jobs_enqueue and the
-- queue-taking proxy functions).
--
-- Promises: a queue lives on one shard, for good: the first call with pin = true for a queue
--           records its shard in jobs_proxy_queues, and every later call returns that row, so
--           ordering, unique keys, limits and pause keep their meaning on that shard and a
--           queue stays where its jobs are when shards are added. A queue with no row goes to
--           hashtext(queue) modulo the current shard count (recorded then when pin is true; a
--           read with pin = false records nothing). Concurrent first pins of one queue agree
--           (INSERT ... ON CONFLICT DO NOTHING, then the row that won). A NULL queue goes to
--           shard 0, whose function raises the usual 22023.
-- Locks:    the new jobs_proxy_queues row when it pins one, until the caller's transaction
--           ends (another first enqueue of the same queue waits for it).
-- States:   none of the jobs.
-- Errors:   22023 naming queue when the proxy has no shards configured.
CREATE OR REPLACE FUNCTION _jobs_proxy_queue_shard(func text, queue text, pin boolean)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_shard integer;
    v_count integer;
BEGIN
    IF _jobs_proxy_queue_shard.queue IS NULL THEN
        RETURN 0;
    END IF;
    SELECT q.shard INTO v_shard FROM jobs_proxy_queues q WHERE q.queue = _jobs_proxy_queue_shard.queue;
    IF FOUND THEN
        RETURN v_shard;
    END IF;
    v_count := _jobs_proxy_shard_count();
    IF v_count = 0 THEN
        PERFORM _jobs_invalid(_jobs_proxy_queue_shard.func, 'queue', 'has no shard: the proxy has no shards (jobs_proxy_set_shards)');
    END IF;
    -- hashtext is an int4; the mask keeps it non-negative before the modulo.
    v_shard := ((hashtext(_jobs_proxy_queue_shard.queue)::bigint & 2147483647) % v_count)::integer;
    IF NOT _jobs_proxy_queue_shard.pin THEN
        RETURN v_shard;
    END IF;
    INSERT INTO jobs_proxy_queues AS q (queue, shard)
    VALUES (_jobs_proxy_queue_shard.queue, v_shard)
    ON CONFLICT (queue) DO NOTHING;
    -- The row that won: ours, or a concurrent first pin's (which hashed the same way unless
    -- the shard count changed in between).
    SELECT q.shard INTO v_shard FROM jobs_proxy_queues q WHERE q.queue = _jobs_proxy_queue_shard.queue;
    RETURN v_shard;
END;
$$;

COMMENT ON FUNCTION _jobs_proxy_queue_shard(text, text, boolean) IS
    'skiplock proxy (private): the shard a queue lives on, pinned in jobs_proxy_queues on first use.';
