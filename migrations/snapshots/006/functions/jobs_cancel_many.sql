-- jobs_cancel_many: jobs_cancel(id) for every job matching the filters, at most max_jobs per call.
--
-- Promises: the jobs that match every non-NULL filter (ids: any of these ids; queue; kind;
--           states, a subset of queued and running) become cancelled as jobs_cancel(id)
--           cancels one; returns how many. A running job's holder is fenced out exactly as
--           by jobs_cancel: its jobs_complete, jobs_snooze and fenced jobs_cancel return
--           false, jobs_fail returns NULL and jobs_heartbeat returns false. Queued jobs are
--           taken before running ones. To cancel everything that matches, call it until it
--           returns 0 (docs/sql-api.md).
-- Safe while workers run: rows are taken FOR NO KEY UPDATE SKIP LOCKED, so the call never
--           waits for a row lock and cannot deadlock with claims, completions, heartbeats
--           or another bulk action. A job whose row a worker is changing at that instant (a
--           claim, completion or heartbeat in progress, or a handler's open CompleteTx) is
--           left for the next call; by then it may have finished, and is left alone.
-- Cost:     queued jobs are read through jobs_ready_idx, running ones through
--           jobs_running_lease_idx; ids through jobs_pkey. Planned for each call's arguments.
--           When a cancelled job's queue has a concurrency limit, NOTIFYs jobs_ready with the
--           queue name at commit, once per queue, as jobs_cancel does.
-- Locks:    the cancelled rows, until the caller's transaction ends.
-- States:   queued -> cancelled, running -> cancelled; finished_at = now(), lease cleared
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
    v_picked bigint[] := '{}';
    v_count  integer;
    v_woken  integer;
BEGIN
    PERFORM _jobs_check_bulk_args('jobs_cancel_many', jobs_cancel_many.states, '{queued, running}',
                                  jobs_cancel_many.max_jobs);

    -- Two reads, one per partial index (a single state IN (...) read could use neither).
    IF 'queued' = ANY (jobs_cancel_many.states) THEN
        v_picked := ARRAY(
            SELECT j.id
            FROM jobs j
            WHERE j.state = 'queued'
              AND (jobs_cancel_many.ids IS NULL OR j.id = ANY (jobs_cancel_many.ids))
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            LIMIT jobs_cancel_many.max_jobs
            FOR NO KEY UPDATE SKIP LOCKED);
    END IF;
    IF 'running' = ANY (jobs_cancel_many.states) AND cardinality(v_picked) < jobs_cancel_many.max_jobs THEN
        v_picked := v_picked || ARRAY(
            SELECT j.id
            FROM jobs j
            -- The running jobs, as jobs_running_lease_idx's predicate (jobs_lease_valid).
            WHERE j.lease_expires_at IS NOT NULL
              AND j.state = 'running'
              AND (jobs_cancel_many.ids IS NULL OR j.id = ANY (jobs_cancel_many.ids))
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            LIMIT jobs_cancel_many.max_jobs - cardinality(v_picked)
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
        WHERE j.id = ANY (v_picked)
          AND j.state IN ('queued', 'running')
        RETURNING j.queue
    ), notified AS (
        -- As jobs_cancel: slots of concurrency-limited queues may have come back, so wake
        -- the workers waiting for one (once per queue).
        SELECT pg_notify('jobs_ready', q.queue)
        FROM jobs_queues q
        WHERE q.queue IN (SELECT c.queue FROM cancelled c)
          AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL)
    )
    SELECT (SELECT count(*) FROM cancelled), (SELECT count(*) FROM notified) INTO v_count, v_woken;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_cancel_many(bigint[], text, text, jobs_state[], integer) IS
    'skiplock: jobs_cancel for up to max_jobs jobs matching the filters (default: queued jobs); fences holders; skips locked rows; returns the count.';
