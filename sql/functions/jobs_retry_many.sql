-- jobs_retry_many: jobs_retry for every job matching the filters, at most max_jobs per call.
--
-- Promises: the jobs that match every non-NULL filter (ids: any of these ids; queue; kind;
--           states, a subset of dead and cancelled) are retried as jobs_retry retries one:
--           back to queued with run_at = now(), max_attempts raised to attempts + 1 when
--           needed, attempts, last_error and errors kept. At most max_jobs jobs per call;
--           returns how many. A job with a unique_key that a live (queued or running) job of
--           its queue holds is left alone and not counted (jobs_retry would raise 23505), as
--           are all but the lowest id of matching jobs sharing a key, so a call never fails
--           for a key. NOTIFYs jobs_ready once per queue that got jobs back.
--           To retry everything that matches, call it until it returns 0 (docs/sql-api.md).
-- Safe while workers run: rows are taken FOR NO KEY UPDATE SKIP LOCKED, so the call never
--           waits for a row lock: it cannot deadlock with claims, completions, jobs_prune,
--           jobs_maintain or another bulk action, and a row locked by someone else is left
--           for the next call of the drain loop. (Waiting in id order would also avoid
--           deadlocks, but would stall behind a handler's open CompleteTx transaction.) The
--           one wait left: when a retried job's unique_key is being enqueued by an open
--           transaction, the unique index makes the call wait for it.
-- Cost:     the default states ('{dead}') read jobs_dead_cancelled_idx; ids read jobs_pkey.
--           Planned for each call's arguments (plan_cache_mode = force_custom_plan), so a
--           NULL filter costs nothing.
-- Locks:    the retried rows, until the caller's transaction ends.
-- States:   dead -> queued, cancelled -> queued; finished_at cleared.
-- Time:     now() (transaction start).
-- Errors:   22023 when states is NULL, empty, holds NULL or a state other than dead and
--           cancelled, or max_jobs is NULL or < 1.
CREATE OR REPLACE FUNCTION jobs_retry_many(
    ids      bigint[]     DEFAULT NULL,
    queue    text         DEFAULT NULL,
    kind     text         DEFAULT NULL,
    states   jobs_state[] DEFAULT '{dead}',
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
    v_picked bigint[];
    v_count  integer;
    v_woken  integer;
BEGIN
    PERFORM _jobs_check_bulk_args('jobs_retry_many', jobs_retry_many.states, '{dead, cancelled}',
                                  jobs_retry_many.max_jobs);

    v_picked := ARRAY(
        SELECT j.id
        FROM jobs j
        WHERE j.state IN ('dead', 'cancelled')
          AND j.state = ANY (jobs_retry_many.states)
          AND (jobs_retry_many.ids IS NULL OR j.id = ANY (jobs_retry_many.ids))
          AND (jobs_retry_many.queue IS NULL OR j.queue = jobs_retry_many.queue)
          AND (jobs_retry_many.kind IS NULL OR j.kind = jobs_retry_many.kind)
          -- A key a live job holds cannot be retried now; skipping it here (not just in the
          -- update) lets a drain loop end instead of picking the same jobs forever.
          AND (j.unique_key IS NULL OR NOT EXISTS (
                  SELECT FROM jobs l
                  WHERE l.queue = j.queue
                    AND l.unique_key = j.unique_key
                    AND l.state IN ('queued', 'running')))
        LIMIT jobs_retry_many.max_jobs
        FOR NO KEY UPDATE SKIP LOCKED);

    WITH chosen AS (
        -- One job per (queue, unique_key) among the picked: two live jobs may not share it.
        SELECT min(j.id) AS id
        FROM jobs j
        WHERE j.id = ANY (v_picked)
        GROUP BY j.queue, j.unique_key, CASE WHEN j.unique_key IS NULL THEN j.id END
    ), retried AS (
        UPDATE jobs j
        SET state = 'queued',
            run_at = now(),
            max_attempts = greatest(j.max_attempts, j.attempts + 1),
            finished_at = NULL
        -- Through jobs_pkey; a join with chosen may be planned as a scan of the whole table.
        WHERE j.id = ANY (ARRAY(SELECT chosen.id FROM chosen))
          AND j.state IN ('dead', 'cancelled')
        RETURNING j.queue
    ), woken AS (
        SELECT pg_notify('jobs_ready', q.queue)
        FROM (SELECT DISTINCT r.queue FROM retried r) AS q
    )
    SELECT (SELECT count(*) FROM retried), (SELECT count(*) FROM woken) INTO v_count, v_woken;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_retry_many(bigint[], text, text, jobs_state[], integer) IS
    'skiplock: jobs_retry for up to max_jobs jobs matching the filters (default: dead jobs); skips locked rows; returns the count.';
