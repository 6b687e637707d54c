-- jobs_notify: wakes the workers of a queue, for jobs enqueued with notify => false.
--
-- Promises: NOTIFYs channel jobs_ready with the queue name as payload, at commit (a rollback
--           wakes no one). Idle workers of the queue then claim at once instead of at their
--           next poll. Call it after the transactions that enqueued with notify => false have
--           committed (a worker woken before their commit does not see their jobs); one call
--           covers every such job of the queue committed before it. The Go driver's notify
--           throttle sends it, in a transaction of its own, once per cooldown window.
-- Locks:    none (the NOTIFY takes PostgreSQL's NOTIFY lock at commit, like any NOTIFY).
-- States:   none.
-- Time:     none.
-- Errors:   22023 when queue is NULL, empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_notify(queue text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_notify.queue IS NULL OR jobs_notify.queue = '' OR octet_length(jobs_notify.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_notify', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    PERFORM pg_notify('jobs_ready', jobs_notify.queue);
END;
$$;

COMMENT ON FUNCTION jobs_notify(text) IS
    'skiplock: wakes the workers of a queue (NOTIFY jobs_ready at commit), for jobs enqueued with notify => false.';
