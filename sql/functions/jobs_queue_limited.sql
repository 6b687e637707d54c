-- jobs_queue_limited: whether claims of a queue are limited.
--
-- Promises: true when the queue has a concurrency limit (max_running or per_key), a rate
--           limit, fair sharing or ordered keys (jobs_set_concurrency, jobs_set_rate_limit),
--           false otherwise (a queue without a jobs_queues row included; a pause is not a
--           limit). Workers that claim ahead of their free slots ask it to claim only what
--           they can start at once on such a queue: a job waiting in a worker's buffer would
--           hold one of the queue's slots, spend one of its starts, hold back the later jobs
--           of its ordered key, or be a turn of its key that another key's job could have
--           had, without running.
-- Locks:    none (a snapshot read).
-- States:   none.
-- Errors:   22023 when queue is NULL, empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_queue_limited(queue text)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_queue_limited.queue IS NULL OR jobs_queue_limited.queue = '' OR octet_length(jobs_queue_limited.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_queue_limited', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    RETURN EXISTS (
        SELECT FROM jobs_queues q
        WHERE q.queue = jobs_queue_limited.queue
          AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
               OR q.fair OR q.ordered));
END;
$$;

COMMENT ON FUNCTION jobs_queue_limited(text) IS
    'skiplock: whether the queue has a concurrency or rate limit, fair sharing or ordered keys; workers claim no more than their free slots from such a queue.';
