-- jobs_set_concurrency: sets or removes a queue's concurrency limits, fair sharing between
-- its keys and ordered keys.
--
-- Promises: from the commit on, claims that start afterwards keep at most max_running jobs
--           of the queue running at any instant, across every worker and process, and at
--           most per_key running jobs sharing one concurrency_key (jobs without a key count
--           against max_running only). NULL means no limit of that kind. A limit below the
--           running count stops new claims of the queue until running falls below it;
--           nothing running is touched. Jobs claimed before the commit (or by a claim
--           already under way) may exceed a new limit while they run.
--           fair true: claims of the queue take its ready jobs round-robin across
--           concurrency_keys, one job per key per turn (priority, run_at, id still order the
--           jobs of a key), from where the queue's previous claim stopped; jobs without a key
--           are one group of their own in the turn (found behind N ready keyed jobs within
--           N / 1,000 + 1 claims that reach the group's turn). A key with 100,000 queued jobs
--           does not starve one with 10. A claim passes at most 1,000 keys that give it
--           nothing (no room, no ready job) and the next one goes on from there, so a ready
--           key behind K such keys is reached within K / 1,000 + 1 claims. Switching fair
--           off forgets where the turn was. ordered true: the queued jobs sharing a
--           concurrency_key run one at a time in id (enqueue) order; a job of the key queued
--           for its retry (after jobs_fail, jobs_snooze, or requeued after its lease expired)
--           holds back the later ones until it is done, dead or cancelled. A job waiting for its parents is not
--           queued and holds nothing back until it is. Jobs without a key are not ordered. See
--           _jobs_claim_limited for both. fair or ordered NULL (the default) leaves that
--           setting as it is, so a call with two or three arguments does not switch either
--           off; false switches it off.
--           The queue's jobs_queues row is removed once nothing is set on it (no pause, no
--           limit, fair and ordered off). NOTIFYs jobs_ready with the queue name, at commit,
--           so workers that the new settings let claim do so at once.
-- Locks:    the queue's jobs_queues row until the transaction ends; waits for a claim
--           holding it.
-- States:   none of the jobs.
-- Time:     now() for jobs_queues.updated_at.
-- Errors:   22023 when queue is NULL, empty or longer than 200 bytes, or max_running or
--           per_key is < 1.
CREATE OR REPLACE FUNCTION jobs_set_concurrency(
    queue       text,
    max_running integer,
    per_key     integer DEFAULT NULL,
    fair        boolean DEFAULT NULL,
    ordered     boolean DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_set_concurrency.queue IS NULL OR jobs_set_concurrency.queue = ''
       OR octet_length(jobs_set_concurrency.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_set_concurrency', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_set_concurrency.max_running < 1 THEN
        PERFORM _jobs_invalid('jobs_set_concurrency', 'max_running', 'must be NULL (no limit) or at least 1');
    END IF;
    IF jobs_set_concurrency.per_key < 1 THEN
        PERFORM _jobs_invalid('jobs_set_concurrency', 'per_key', 'must be NULL (no limit) or at least 1');
    END IF;

    INSERT INTO jobs_queues AS q (queue, max_running, per_key, fair, ordered)
    VALUES (jobs_set_concurrency.queue, jobs_set_concurrency.max_running, jobs_set_concurrency.per_key,
            coalesce(jobs_set_concurrency.fair, false), coalesce(jobs_set_concurrency.ordered, false))
    ON CONFLICT (queue) DO UPDATE
    SET max_running = excluded.max_running,
        per_key = excluded.per_key,
        fair = coalesce(jobs_set_concurrency.fair, q.fair),
        ordered = coalesce(jobs_set_concurrency.ordered, q.ordered),
        -- A fair queue starts its turns anew.
        rr_cursor = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_cursor END,
        rr_unkeyed_priority = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_unkeyed_priority END,
        rr_unkeyed_run_at = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_unkeyed_run_at END,
        rr_unkeyed_id = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_unkeyed_id END,
        updated_at = now();

    DELETE FROM jobs_queues q
    WHERE q.queue = jobs_set_concurrency.queue
      AND NOT q.paused AND q.max_running IS NULL AND q.per_key IS NULL AND q.max_starts IS NULL
      AND NOT q.fair AND NOT q.ordered;
    PERFORM pg_notify('jobs_ready', jobs_set_concurrency.queue);
END;
$$;

COMMENT ON FUNCTION jobs_set_concurrency(text, integer, integer, boolean, boolean) IS
    'skiplock: caps how many jobs of a queue run at once (max_running) and per concurrency_key (per_key), exactly and cluster-wide (NULL removes a cap); fair shares claims round-robin across keys, ordered runs each key''s jobs one at a time in enqueue order (NULL keeps the setting).';
