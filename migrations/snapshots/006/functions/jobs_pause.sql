-- jobs_pause: stops jobs_claim from handing out jobs of a queue.
--
-- Promises: returns true when this call paused the queue, false when it was paused already.
--           Once the call commits, no claim that starts afterwards takes a job of the queue,
--           whether it names the queue or claims from every queue (queues NULL). Nothing else
--           changes: running jobs finish, complete, fail and heartbeat normally, enqueue
--           works, and jobs_requeue_expired still takes back expired leases (to queued).
--           The setting is a row of jobs_queues and survives restarts; jobs_resume undoes it.
--           A queue may be paused before it has any job.
-- Locks:    the queue's jobs_queues row (inserted or updated) until the transaction ends;
--           waits for a claim holding it (a limited queue's claim).
-- States:   none of the jobs.
-- Time:     now() for jobs_queues.updated_at.
-- Errors:   22023 when queue is NULL, empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_pause(queue text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_paused boolean;
BEGIN
    IF jobs_pause.queue IS NULL OR jobs_pause.queue = '' OR octet_length(jobs_pause.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_pause', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;

    INSERT INTO jobs_queues AS q (queue, paused)
    VALUES (jobs_pause.queue, true)
    ON CONFLICT (queue) DO UPDATE
    SET paused = true,
        updated_at = now()
    WHERE NOT q.paused
    RETURNING true INTO v_paused;
    RETURN coalesce(v_paused, false);
END;
$$;

COMMENT ON FUNCTION jobs_pause(text) IS
    'skiplock: pauses a queue (jobs_claim hands out none of its jobs); true when this call paused it.';
