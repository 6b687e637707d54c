-- jobs_next_start: when a rate-limited queue may start its next job.
--
-- Promises: NULL when the queue has no rate limit (or is paused: jobs_resume notifies).
--           Otherwise the earliest time at which a claim of the queue may start a job: now()
--           while the window has budget left, else the moment enough of its starts have
--           aged out of it. A worker whose
--           claim came back short sleeps until then (minus clock_timestamp()) instead of
--           polling. Concurrency limits are not reflected: a slot frees when a job leaves
--           running, which no clock predicts.
--           A rate limit per key (jobs_set_rate_limit's per_key): the earliest time at which
--           one of the keys whose window is full (jobs without a key being one group) may
--           start again, or NULL when no key's window is full: a claim that came back short
--           was then cut by something else (no ready job of a key with budget, a concurrency
--           limit, an ordered key), which no clock predicts either.
-- Locks:    none (a snapshot read; a claim may take the budget first).
-- States:   none.
-- Time:     now() (transaction start): called in the claim's transaction, it sees the
--           starts that claim logged.
-- Errors:   22023 when queue is NULL, empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_next_start(queue text)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_q     record;
    v_n     integer;
    v_first timestamptz;
BEGIN
    IF jobs_next_start.queue IS NULL OR jobs_next_start.queue = '' OR octet_length(jobs_next_start.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_next_start', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;

    SELECT q.max_starts, q.per, q.rate_per_key INTO v_q
    FROM jobs_queues q
    WHERE q.queue = jobs_next_start.queue AND NOT q.paused AND q.max_starts IS NOT NULL;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    IF v_q.rate_per_key THEN
        -- Per key, the same rule: the (n - max_starts + 1)th oldest start of each full key.
        RETURN (SELECT min(t.started_at) + v_q.per
                FROM (SELECT s.started_at,
                             count(*) OVER (PARTITION BY s.concurrency_key) AS n,
                             row_number() OVER (PARTITION BY s.concurrency_key ORDER BY s.started_at) AS rn
                      FROM jobs_queue_starts s
                      WHERE s.queue = jobs_next_start.queue AND s.started_at > now() - v_q.per) t
                WHERE t.n >= v_q.max_starts AND t.rn = t.n - v_q.max_starts + 1);
    END IF;

    -- The claim counts every start after its now() - per; a start is allowed once fewer
    -- than max_starts of them are left, that is when the (v_n - max_starts + 1)th oldest
    -- of them (and every start tied with it) is per old.
    SELECT count(*)::integer INTO v_n
    FROM jobs_queue_starts s
    WHERE s.queue = jobs_next_start.queue AND s.started_at > now() - v_q.per;
    IF v_n < v_q.max_starts THEN
        RETURN now();
    END IF;
    SELECT s.started_at INTO v_first
    FROM jobs_queue_starts s
    WHERE s.queue = jobs_next_start.queue AND s.started_at > now() - v_q.per
    ORDER BY s.started_at
    OFFSET v_n - v_q.max_starts
    LIMIT 1;
    RETURN v_first + v_q.per;
END;
$$;

COMMENT ON FUNCTION jobs_next_start(text) IS
    'skiplock: when a rate-limited queue may start its next job (NULL: no rate limit); workers sleep until then.';
