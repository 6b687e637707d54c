-- jobs_set_rate_limit: sets or removes a queue's rate limit.
--
-- Promises: from the commit on, in any window of length per, at most max_starts jobs of the
--           queue are claimed (counted at claim time, the claiming transaction's now(); see
--           _jobs_claim_limited). A claim beyond the budget returns fewer jobs, never an
--           error; jobs_next_start says when the next start is allowed. NULL max_starts
--           removes the limit (per is then ignored), its log of starts, and the queue's
--           jobs_queues row when nothing else is set on it. Changing the limit keeps the
--           log, so the new limit counts the starts already made in its window; the log
--           holds the starts of the last two windows of the old per, so a longer new per
--           counts only those. NOTIFYs jobs_ready with the queue name, at commit.
--           per_key true: the window counts the starts of each concurrency_key apart, so in
--           any window of length per at most max_starts jobs of each key are claimed (exact,
--           like the queue-wide limit); jobs without a key count as one group of their own,
--           with the same budget. The queue then has no queue-wide rate limit. Starts logged
--           before the switch count for their key (the log keeps each start's key).
-- Locks:    the queue's jobs_queues row until the transaction ends; waits for a claim
--           holding it.
-- States:   none of the jobs.
-- Time:     now() for jobs_queues.updated_at.
-- Errors:   22023 when queue is NULL, empty or longer than 200 bytes, max_starts is < 1,
--           (with max_starts) per is NULL, <= 0 or longer than 100 years, or per_key is NULL.
CREATE OR REPLACE FUNCTION jobs_set_rate_limit(
    queue      text,
    max_starts integer,
    per        interval,
    per_key    boolean DEFAULT false
)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_set_rate_limit.queue IS NULL OR jobs_set_rate_limit.queue = ''
       OR octet_length(jobs_set_rate_limit.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_set_rate_limit.max_starts < 1 THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'max_starts', 'must be NULL (no limit) or at least 1');
    END IF;
    IF jobs_set_rate_limit.max_starts IS NOT NULL
       AND (jobs_set_rate_limit.per IS NULL OR jobs_set_rate_limit.per <= interval '0'
            OR jobs_set_rate_limit.per > interval '100 years') THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'per', 'must be a positive interval of at most 100 years');
    END IF;
    IF jobs_set_rate_limit.per_key IS NULL THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'per_key', 'must be true or false');
    END IF;

    INSERT INTO jobs_queues AS q (queue, max_starts, per, rate_per_key)
    VALUES (jobs_set_rate_limit.queue, jobs_set_rate_limit.max_starts,
            CASE WHEN jobs_set_rate_limit.max_starts IS NOT NULL THEN jobs_set_rate_limit.per END,
            jobs_set_rate_limit.max_starts IS NOT NULL AND jobs_set_rate_limit.per_key)
    ON CONFLICT (queue) DO UPDATE
    SET max_starts = excluded.max_starts,
        per = excluded.per,
        rate_per_key = excluded.rate_per_key,
        updated_at = now();

    IF jobs_set_rate_limit.max_starts IS NULL THEN
        DELETE FROM jobs_queue_starts s WHERE s.queue = jobs_set_rate_limit.queue;
        DELETE FROM jobs_queues q
        WHERE q.queue = jobs_set_rate_limit.queue
          AND NOT q.paused AND q.max_running IS NULL AND q.per_key IS NULL AND q.max_starts IS NULL
          AND NOT q.fair AND NOT q.ordered;
    END IF;
    PERFORM pg_notify('jobs_ready', jobs_set_rate_limit.queue);
END;
$$;

COMMENT ON FUNCTION jobs_set_rate_limit(text, integer, interval, boolean) IS
    'skiplock: caps how many jobs of a queue (per_key: of each concurrency_key) are claimed in any window of length per (max_starts); NULL max_starts removes it.';
