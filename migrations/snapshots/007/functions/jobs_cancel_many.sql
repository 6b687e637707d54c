-- jobs_cancel_many: jobs_cancel(id) for every job matching the filters, at most max_jobs per call.
--
-- Promises: the jobs that match every non-NULL filter (ids: any of these ids; queue; kind;
--           states, a subset of waiting, queued and running) become cancelled as jobs_cancel(id)
--           cancels one; returns how many. A running job's holder is fenced out exactly as
--           by jobs_cancel: its jobs_complete, jobs_snooze and fenced jobs_cancel return
--           false, jobs_fail returns NULL and jobs_heartbeat returns false. Queued jobs are
--           taken before running ones, and those before waiting ones. To cancel everything that matches, call it until it
--           returns 0 (docs/sql-api.md).
-- Safe while workers run: rows are taken SKIP LOCKED (queued jobs' jobs_queued rows FOR
--           UPDATE, running jobs FOR NO KEY UPDATE), so the call never waits for a job's row
--           lock and cannot deadlock with claims, completions, heartbeats or another bulk
--           action; the one wait is for a completion in progress of another job of the same
--           claim (both lower its jobs_claims running count). A job whose row a worker is changing at that instant (a
--           claim, completion or heartbeat in progress, or a handler's open CompleteTx) is
--           left for the next call; by then it may have finished, and is left alone.
--           Workflows are the exception: cancelling jobs with children (has_children) also
--           cancels their waiting descendants, one cancelled job after the other
--           (jobs_finished_cascade), and a batch of completions locking shared children in
--           another order can deadlock with that: one of the two gets 40P01 and is rolled
--           back (the Go driver retries its completions; call this again).
-- Cost:     queued jobs are read through jobs_queued (jobs_ready_idx), running ones
--           through the jobs listed by jobs_claims, waiting ones through their unresolved
--           jobs_dependencies rows; ids through jobs_pkey. Planned for each
--           call's arguments.
--           When a cancelled job's queue has a concurrency limit or ordered keys, NOTIFYs jobs_ready with the
--           queue name at commit, once per queue, as jobs_cancel does.
-- Locks:    the cancelled rows, until the caller's transaction ends.
-- States:   waiting, queued or running -> cancelled; finished_at = now(), lease cleared
--           (lease_role too).
-- Time:     now() (transaction start).
-- Errors:   22023 when states is NULL, empty, holds NULL or a state other than queued and
--           running, or max_jobs is NULL or < 1.
CREATE OR REPLACE FUNCTION jobs_cancel_many(
    ids      bigint[]     DEFAULT NULL,
    queue    text         DEFAULT NULL,
    kind     text         DEFAULT NULL,
    states   jobs_state[] DEFAULT '{queued}',
    max_jobs integer      DEFAULT 10000
)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    v_queued  bigint[] := '{}';
    v_running bigint[] := '{}';
    v_waiting bigint[] := '{}';
    v_count   integer;
    v_claims  bigint[];
    v_queues  text[];
BEGIN
    PERFORM _jobs_check_bulk_args('jobs_cancel_many', jobs_cancel_many.states, '{waiting, queued, running}',
                                  jobs_cancel_many.max_jobs);

    -- Queued jobs leave jobs_queued first (the order claims lock in): their rows there are
    -- taken SKIP LOCKED (a claim holding one gets the job) and deleted.
    IF 'queued' = ANY (jobs_cancel_many.states) THEN
        WITH picked AS (
            SELECT q.ctid AS row
            FROM jobs j
            JOIN jobs_queued q ON (q.queue, q.priority, q.run_at, q.id) = (j.queue, j.priority, j.run_at, j.id)
            WHERE j.state = 'queued'
              AND (jobs_cancel_many.ids IS NULL OR j.id = ANY (jobs_cancel_many.ids))
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            LIMIT jobs_cancel_many.max_jobs
            FOR UPDATE OF q SKIP LOCKED
        ), taken AS (
            DELETE FROM jobs_queued q
            WHERE q.ctid = ANY (ARRAY(SELECT picked.row FROM picked))
            RETURNING q.id
        )
        SELECT coalesce(array_agg(taken.id), '{}') INTO v_queued FROM taken;
    END IF;
    -- Running jobs: those listed by jobs_claims (of the queue) and still running, or the ids.
    IF 'running' = ANY (jobs_cancel_many.states) AND cardinality(v_queued) < jobs_cancel_many.max_jobs THEN
        v_running := ARRAY(
            SELECT j.id
            FROM jobs j
            WHERE j.id = ANY (coalesce(jobs_cancel_many.ids,
                                       ARRAY(SELECT u.id
                                             FROM jobs_claims c
                                             CROSS JOIN LATERAL unnest(c.ids) AS u(id)
                                             WHERE jobs_cancel_many.queue IS NULL OR c.queue = jobs_cancel_many.queue)))
              AND j.state = 'running'
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            LIMIT jobs_cancel_many.max_jobs - cardinality(v_queued)
            FOR NO KEY UPDATE SKIP LOCKED);
    END IF;

    -- Waiting jobs: each has an unresolved jobs_dependencies row (or the ids).
    IF 'waiting' = ANY (jobs_cancel_many.states)
       AND cardinality(v_queued) + cardinality(v_running) < jobs_cancel_many.max_jobs THEN
        v_waiting := ARRAY(
            SELECT j.id
            FROM jobs j
            WHERE j.id = ANY (coalesce(jobs_cancel_many.ids,
                                       ARRAY(SELECT DISTINCT d.child_id FROM jobs_dependencies d WHERE NOT d.resolved)))
              AND j.state = 'waiting'
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            ORDER BY j.id
            LIMIT jobs_cancel_many.max_jobs - cardinality(v_queued) - cardinality(v_running)
            FOR NO KEY UPDATE SKIP LOCKED);
    END IF;

    -- The same change as jobs_cancel(id), which is what fences the holder: its calls quote
    -- (id, attempt) and require state = 'running'.
    WITH cancelled AS (
        UPDATE jobs j
        SET state = 'cancelled',
            finished_at = now(),
            lease_expires_at = NULL,
            lease_role = NULL
        WHERE j.id = ANY (v_queued || v_running || v_waiting)
          AND j.state IN ('waiting', 'queued', 'running')
        RETURNING j.id, j.queue, j.claim_id
    )
    SELECT count(*)::integer,
           coalesce(array_agg(c.claim_id) FILTER (WHERE c.id = ANY (v_running)), '{}'),
           coalesce(array_agg(DISTINCT c.queue), '{}')
    INTO v_count, v_claims, v_queues
    FROM cancelled c;
    PERFORM _jobs_claims_release(v_claims);

    -- As jobs_cancel: slots of concurrency-limited queues may have come back, so wake the
    -- workers waiting for one (once per queue).
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = ANY (v_queues)
      AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_cancel_many(bigint[], text, text, jobs_state[], integer) IS
    'skiplock: jobs_cancel for up to max_jobs jobs matching the filters (default: queued jobs); fences holders; skips locked rows; returns the count.';
