-- jobs_complete_and_claim: jobs_complete_many, then jobs_claim, in one call and one transaction.
--
-- Promises: completes the (ids[i], attempts[i]) pairs (with results[i] when results is not
--           NULL) by jobs_complete_many's fenced rule (a
--           pair whose job is no longer held at that attempt, or is held by another login,
--           is left alone and missing from completed), then claims up to max_jobs jobs by jobs_claim's rules (readiness, flow
--           control, FOR NO KEY UPDATE SKIP LOCKED, (priority, run_at, id) order; the new
--           attempts value of each claimed job is its fencing token), with one difference:
--           the claim never waits on a lock. A paused or limited queue is claimed by
--           _jobs_claim_limited with skip_locked_queues, so a limited queue whose jobs_queues
--           row another transaction holds (another claim of the queue, an operator's open
--           jobs_set_concurrency, jobs_set_rate_limit, jobs_pause or jobs_resume) is not
--           waited for, where jobs_claim would wait for the row: the completions commit at
--           once instead of waiting behind it, and their leases cannot lapse meanwhile. Such
--           a queue gives only the slots this call's completions handed over (as many of its
--           jobs as it completed of that queue, when the queue has max_running and no other
--           limit, nor fair sharing or ordered keys: the queue's running total does not grow, so no lock is needed; see
--           _jobs_claim_limited), else nothing. So claiming fewer than max_jobs (even none)
--           from a limited queue does not mean that it has no ready job or no free slot: a
--           caller that wants the rest claims them with jobs_claim, which waits its turn. The
--           limits hold exactly as for jobs_claim. Both functions are called, not copied, so
--           whatever either promises this promises too. A worker's cycle (record
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
-- Locks:    those of jobs_complete_many (the completed rows, in id order) and of the claim
--           (the claimed rows; the jobs_queues row of each limited queue it claims from, but
--           for handed-over slots),
--           until the caller's transaction ends. The completion locks only rows this worker
--           holds and the claim takes every lock SKIP LOCKED (the jobs_queues rows too, unlike
--           jobs_claim), so the call waits for no claim, operator or other caller, and two
--           callers cannot deadlock each other. (It can wait for a session that locks a row
--           this worker holds, as jobs_complete_many can.) Whether a requested queue is
--           paused or limited is looked at before the completions and again after them, so a
--           limit set while they ran is skipped too; only one committed in the instant
--           between that second look and jobs_claim's own (no lock is waited for between the
--           two) can still make jobs_claim wait for the queue's row.
-- States:   running -> done (the completed pairs); queued -> running (the claimed jobs).
-- Time:     now() (transaction start), as in both functions.
-- Errors:   22023 (naming this function and the parameter) for the arrays as jobs_complete_many
--           checks them, and for worker, queues and lease as jobs_claim checks them; max_jobs
--           must be in 0..10000; results as jobs_complete_many checks it. Every argument
--           is checked before anything is done. 0A000 as
--           jobs_claim, for a limited queue whose jobs_queues row the claim locks (one held
--           elsewhere is skipped before the check).
CREATE OR REPLACE FUNCTION jobs_complete_and_claim(
    worker   text,
    ids      bigint[],
    attempts integer[],
    max_jobs integer  DEFAULT 1,
    queues   text[]   DEFAULT NULL,
    lease    interval DEFAULT '5 minutes',
    results  jsonb[]  DEFAULT NULL
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
    meta             jsonb,
    parent_results   jsonb,
    checkpoints      jsonb
)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_completed    bigint[];
    v_limited      boolean;
    v_held_ids     bigint[]  := '{}';
    v_held_queues  text[]    := '{}';
    v_freed_queues text[]    := '{}';
    v_freed_slots  integer[] := '{}';
BEGIN
    -- The same checks as the two functions make, here so that an error names this function
    -- and nothing is completed before a bad claim argument is found; max_jobs may also be 0.
    PERFORM _jobs_check_fence_arrays('jobs_complete_and_claim', jobs_complete_and_claim.ids,
                                     jobs_complete_and_claim.attempts);
    IF jobs_complete_and_claim.results IS NOT NULL
       AND (array_ndims(jobs_complete_and_claim.results) > 1
            OR coalesce(cardinality(jobs_complete_and_claim.results), 0) <> cardinality(jobs_complete_and_claim.ids)
            OR EXISTS (SELECT FROM unnest(jobs_complete_and_claim.results) AS r WHERE octet_length(r::text) > 1048576)) THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'results',
                              'must be NULL or a one-dimensional array as long as ids of results of at most 1 MB');
    END IF;
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

    -- jobs_claim's own test for its fast path: with a paused or limited queue among those
    -- requested, the limited claim is called directly, told to skip the jobs_queues rows that
    -- others hold (jobs_claim would wait for them, and the completions with it).
    v_limited := jobs_complete_and_claim.max_jobs > 0 AND EXISTS (
        SELECT FROM jobs_queues q
        WHERE (jobs_complete_and_claim.queues IS NULL OR q.queue = ANY (jobs_complete_and_claim.queues))
          AND (q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
               OR q.fair OR q.ordered)
    );
    IF v_limited AND cardinality(jobs_complete_and_claim.ids) > 0 THEN
        -- The pairs' queues, read before completing (a completion may delete the row; a
        -- job's queue never changes), for the slots the completions hand over.
        SELECT coalesce(array_agg(j.id), '{}'), coalesce(array_agg(j.queue), '{}')
        INTO v_held_ids, v_held_queues
        FROM jobs j
        WHERE j.id = ANY (jobs_complete_and_claim.ids) AND j.state = 'running';
    END IF;

    -- Completions first: slots of limited queues they free are free for the claim.
    v_completed := ARRAY(
        SELECT d.done_id
        FROM jobs_complete_many(jobs_complete_and_claim.ids, jobs_complete_and_claim.attempts,
                                jobs_complete_and_claim.results) AS d(done_id)
        ORDER BY d.done_id
    );

    IF jobs_complete_and_claim.max_jobs > 0 AND NOT v_limited THEN
        -- Looked again: a requested queue may have been paused or limited while the
        -- completions ran (they can wait for a job row another session locks, or just take
        -- long), and jobs_claim, deciding afresh, would then wait for its jobs_queues row.
        -- Such a queue is claimed with the skipping claim too (no slot handover: the pairs'
        -- queues were not read).
        v_limited := EXISTS (
            SELECT FROM jobs_queues q
            WHERE (jobs_complete_and_claim.queues IS NULL OR q.queue = ANY (jobs_complete_and_claim.queues))
              AND (q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                   OR q.fair OR q.ordered)
        );
    END IF;

    IF jobs_complete_and_claim.max_jobs > 0 THEN
        -- WITH ORDINALITY numbers the rows in the order the claim returns them.
        IF v_limited THEN
            SELECT coalesce(array_agg(f.queue), '{}'), coalesce(array_agg(f.n), '{}')
            INTO v_freed_queues, v_freed_slots
            FROM (SELECT h.queue, count(*)::integer AS n
                  FROM unnest(v_held_ids, v_held_queues) AS h(id, queue)
                  WHERE h.id = ANY (v_completed)
                  GROUP BY h.queue) f;
            RETURN QUERY
            SELECT CASE WHEN c.ord = 1 THEN v_completed END,
                   c.c_id, c.c_queue, c.c_kind, c.c_payload, c.c_attempt, c.c_max_attempts, c.c_priority,
                   c.c_run_at, c.c_lease_expires_at, c.c_created_at, c.c_meta, c.c_parent_results,
                   c.c_checkpoints
            FROM _jobs_claim_limited(jobs_complete_and_claim.worker, jobs_complete_and_claim.max_jobs,
                                     jobs_complete_and_claim.queues, jobs_complete_and_claim.lease,
                                     skip_locked_queues => true, freed_queues => v_freed_queues,
                                     freed_slots => v_freed_slots)
                 WITH ORDINALITY AS c(c_id, c_queue, c_kind, c_payload, c_attempt, c_max_attempts, c_priority,
                                      c_run_at, c_lease_expires_at, c_created_at, c_meta,
                                      c_parent_results, c_checkpoints, ord)
            ORDER BY c.ord;
        ELSE
            RETURN QUERY
            SELECT CASE WHEN c.ord = 1 THEN v_completed END,
                   c.c_id, c.c_queue, c.c_kind, c.c_payload, c.c_attempt, c.c_max_attempts, c.c_priority,
                   c.c_run_at, c.c_lease_expires_at, c.c_created_at, c.c_meta, c.c_parent_results,
                   c.c_checkpoints
            FROM jobs_claim(jobs_complete_and_claim.worker, jobs_complete_and_claim.max_jobs,
                            jobs_complete_and_claim.queues, jobs_complete_and_claim.lease)
                 WITH ORDINALITY AS c(c_id, c_queue, c_kind, c_payload, c_attempt, c_max_attempts, c_priority,
                                      c_run_at, c_lease_expires_at, c_created_at, c_meta,
                                      c_parent_results, c_checkpoints, ord)
            ORDER BY c.ord;
        END IF;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;

    -- Nothing claimed: one row that still reports the completions.
    RETURN QUERY
    SELECT v_completed, NULL::bigint, NULL::text, NULL::text, NULL::jsonb, NULL::integer, NULL::integer,
           NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::jsonb;
END;
$$;

COMMENT ON FUNCTION jobs_complete_and_claim(text, bigint[], integer[], integer, text[], interval, jsonb[]) IS
    'skiplock: jobs_complete_many(ids, attempts, results) then jobs_claim(worker, max_jobs, queues, lease) in one call; completed (ids) on the first row, then the claimed jobs.';
