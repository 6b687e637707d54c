-- jobs_complete_and_claim: jobs_complete_many, then jobs_claim, in one call and one transaction.
--
-- Promises: completes the (ids[i], attempts[i]) pairs by jobs_complete_many's fenced rule (a
--           pair whose job is no longer held at that attempt, or is held by another login,
--           is left alone and missing from completed), then claims up to max_jobs jobs by jobs_claim's rules (readiness, flow
--           control, FOR NO KEY UPDATE SKIP LOCKED, (priority, run_at, id) order; the new
--           attempts value of each claimed job is its fencing token). Both are called, not
--           copied, so whatever either promises this promises too. A worker's cycle (record
--           the finished batch, take the next) is then one round trip and one commit instead
--           of two; slots of concurrency-limited queues freed by the completions are free for
--           the claim that follows. max_jobs 0 completes only (a last flush, or a caller that
--           has no free slots).
--           Result: one row per claimed job, in claim order, with the columns of jobs_claimed
--           after a first column completed (bigint[]: the ids completed, in id order). completed
--           is set on the first row only and NULL on the others. When nothing is claimed the
--           result is still one row: completed, and NULL in every job column (id IS NULL).
--           Why this shape: every client reads it as plain columns (psql, psycopg, node-postgres
--           need no composite or array-of-composite type registered, as a jobs_claimed[] column
--           would), the completions arrive also when no job does, and the ids are sent once
--           rather than repeated on every row. Tagging each row as either a completion or a
--           claim was rejected: it sends one extra row per completed job.
-- Locks:    those of jobs_complete_many (the completed rows, in id order) and jobs_claim (the
--           claimed rows; a limited queue's jobs_queues row), until the caller's transaction
--           ends. The completion locks only rows this worker holds and the claim skips locked
--           rows, so two callers cannot deadlock each other.
-- States:   running -> done (the completed pairs); queued -> running (the claimed jobs).
-- Time:     now() (transaction start), as in both functions.
-- Errors:   22023 (naming this function and the parameter) for the arrays as jobs_complete_many
--           checks them, and for worker, queues and lease as jobs_claim checks them; max_jobs
--           must be in 0..10000. Every argument is checked before anything is done. 0A000 as
--           jobs_claim.
CREATE OR REPLACE FUNCTION jobs_complete_and_claim(
    worker   text,
    ids      bigint[],
    attempts integer[],
    max_jobs integer  DEFAULT 1,
    queues   text[]   DEFAULT NULL,
    lease    interval DEFAULT '5 minutes'
)
RETURNS TABLE (
    completed        bigint[],
    id               bigint,
    queue            text,
    kind             text,
    payload          jsonb,
    attempt          integer,
    max_attempts     integer,
    priority         integer,
    run_at           timestamptz,
    lease_expires_at timestamptz,
    created_at       timestamptz,
    meta             jsonb
)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_completed bigint[];
BEGIN
    -- The same checks as the two functions make, here so that an error names this function
    -- and nothing is completed before a bad claim argument is found; max_jobs may also be 0.
    PERFORM _jobs_check_fence_arrays('jobs_complete_and_claim', jobs_complete_and_claim.ids,
                                     jobs_complete_and_claim.attempts);
    IF jobs_complete_and_claim.worker IS NULL OR jobs_complete_and_claim.worker = ''
       OR octet_length(jobs_complete_and_claim.worker) > 200 THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'worker', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_complete_and_claim.max_jobs IS NULL OR jobs_complete_and_claim.max_jobs < 0
       OR jobs_complete_and_claim.max_jobs > 10000 THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'max_jobs', 'must be between 0 and 10000');
    END IF;
    IF array_ndims(jobs_complete_and_claim.queues) > 1 THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'queues', 'must be a one-dimensional array');
    END IF;
    IF jobs_complete_and_claim.queues IS NOT NULL
       AND (cardinality(jobs_complete_and_claim.queues) = 0
            OR array_position(jobs_complete_and_claim.queues, NULL) IS NOT NULL) THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'queues', 'must be NULL (all queues) or a non-empty array without NULLs');
    END IF;
    IF jobs_complete_and_claim.lease IS NULL OR jobs_complete_and_claim.lease <= interval '0'
       OR jobs_complete_and_claim.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    -- Completions first: slots of limited queues they free are free for the claim.
    v_completed := ARRAY(
        SELECT d.done_id
        FROM jobs_complete_many(jobs_complete_and_claim.ids, jobs_complete_and_claim.attempts) AS d(done_id)
        ORDER BY d.done_id
    );

    IF jobs_complete_and_claim.max_jobs > 0 THEN
        -- WITH ORDINALITY numbers the rows in the order jobs_claim returns them.
        RETURN QUERY
        SELECT CASE WHEN c.ord = 1 THEN v_completed END,
               c.c_id, c.c_queue, c.c_kind, c.c_payload, c.c_attempt, c.c_max_attempts, c.c_priority,
               c.c_run_at, c.c_lease_expires_at, c.c_created_at, c.c_meta
        FROM jobs_claim(jobs_complete_and_claim.worker, jobs_complete_and_claim.max_jobs,
                        jobs_complete_and_claim.queues, jobs_complete_and_claim.lease)
             WITH ORDINALITY AS c(c_id, c_queue, c_kind, c_payload, c_attempt, c_max_attempts, c_priority,
                                  c_run_at, c_lease_expires_at, c_created_at, c_meta, ord)
        ORDER BY c.ord;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;

    -- Nothing claimed: one row that still reports the completions.
    RETURN QUERY
    SELECT v_completed, NULL::bigint, NULL::text, NULL::text, NULL::jsonb, NULL::integer, NULL::integer,
           NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::jsonb;
END;
$$;

COMMENT ON FUNCTION jobs_complete_and_claim(text, bigint[], integer[], integer, text[], interval) IS
    'skiplock: jobs_complete_many(ids, attempts) then jobs_claim(worker, max_jobs, queues, lease) in one call; completed (ids) on the first row, then the claimed jobs.';
