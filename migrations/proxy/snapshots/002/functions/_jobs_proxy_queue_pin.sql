-- _jobs_proxy_queue_pin: pins a queue to a given shard unless it lives on another (the
-- queues of a job with parents and of a workflow's steps, which must live where those jobs
-- live).
--
-- Promises: returns the shard the queue lives on: its jobs_proxy_queues row when it has one
--           (whatever shard was asked for), else `shard`, recorded now in jobs_proxy_queues
--           even when hashtext(queue) would have put the queue elsewhere. The caller compares
--           the answer with `shard`. Concurrent first pins of one queue agree (INSERT ... ON
--           CONFLICT DO NOTHING, then the row that won). A NULL queue is pinned nowhere and
--           returns `shard`, whose function raises the usual 22023.
-- Locks:    the new jobs_proxy_queues row when it pins one, until the caller's transaction
--           ends (another first pin of the same queue waits for it).
-- States:   none of the jobs.
CREATE OR REPLACE FUNCTION _jobs_proxy_queue_pin(func text, queue text, shard integer)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_shard integer;
BEGIN
    IF _jobs_proxy_queue_pin.queue IS NULL THEN
        RETURN _jobs_proxy_queue_pin.shard;
    END IF;
    INSERT INTO jobs_proxy_queues AS q (queue, shard)
    VALUES (_jobs_proxy_queue_pin.queue, _jobs_proxy_check_shard(_jobs_proxy_queue_pin.func, _jobs_proxy_queue_pin.shard))
    ON CONFLICT (queue) DO NOTHING;
    -- The row that won: ours, an earlier pin, or a concurrent first pin's.
    SELECT q.shard INTO v_shard FROM jobs_proxy_queues q WHERE q.queue = _jobs_proxy_queue_pin.queue;
    RETURN v_shard;
END;
$$;

COMMENT ON FUNCTION _jobs_proxy_queue_pin(text, text, integer) IS
    'skiplock proxy (private): pins a queue to a shard unless it has a pin; returns the shard the queue lives on.';
