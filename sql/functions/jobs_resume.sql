-- jobs_resume: lets jobs_claim hand out jobs of a paused queue again.
--
-- Promises: returns true when this call resumed the queue, false when it was not paused.
--           When it resumes the queue it NOTIFYs channel jobs_ready with the queue name, at
--           commit, so idle workers claim at once instead of at their next poll. The queue's
--           jobs_queues row is deleted when no limit is left on it.
-- Locks:    the queue's jobs_queues row until the transaction ends; waits for a claim
--           holding it (a limited queue's claim).
-- States:   none of the jobs.
-- Time:     now() for jobs_queues.updated_at.
-- Errors:   22023 when queue is NULL, empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_resume(queue text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_resume.queue IS NULL OR jobs_resume.queue = '' OR octet_length(jobs_resume.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_resume', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;

    UPDATE jobs_queues q
    SET paused = false,
        updated_at = now()
    WHERE q.queue = jobs_resume.queue
      AND q.paused;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    DELETE FROM jobs_queues q
    WHERE q.queue = jobs_resume.queue
      AND q.max_running IS NULL AND q.per_key IS NULL AND q.max_starts IS NULL
      AND NOT q.fair AND NOT q.ordered;
    PERFORM pg_notify('jobs_ready', jobs_resume.queue);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION jobs_resume(text) IS
    'skiplock: resumes a paused queue and wakes workers; true when this call resumed it.';
