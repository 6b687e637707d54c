-- jobs_maintain: one bounded round of housekeeping; returns what it did.
--
-- Promises: takes back expired leases (jobs_requeue_expired), then deletes the done,
--           cancelled and dead jobs whose finished_at is older than that state's retention
--           in jobs_settings (done_retention, cancelled_retention, dead_retention; NULL
--           keeps the state forever), at most max_jobs of each state per round, oldest
--           first. Returns one row: ran (false when another session's round was in
--           progress: nothing was done), requeued, pruned_done, pruned_cancelled,
--           pruned_dead, and more (a prune hit max_jobs: call again to catch up).
--           Every Go client calls it every Config.RequeueInterval, again at once while more
--           is true; psql users schedule it (docs/operations.md).
-- No leader, no work done twice: a round holds a transaction-level advisory lock
--           (pg_try_advisory_xact_lock, keyed by this function's oid, so every install
--           schema has its own); a caller that does not get it returns at once with
--           ran = false instead of repeating or waiting for the round in progress. The rows
--           it deletes are also taken with SKIP LOCKED, so jobs_prune, jobs_delete_many or a
--           worker holding a row never make it wait.
-- Cost:     nothing due: a few index probes. Dead and cancelled jobs are found through
--           jobs_dead_cancelled_idx. Done jobs have no index of their own (completions
--           would pay for it): they are read along jobs_pkey from the lowest id up to the
--           first job created after the cutoff (found by a binary search over jobs_pkey,
--           as ids grow with created_at and a job cannot finish before it was created), so
--           the walk covers the jobs old enough to be due, not the recent ones. Retained
--           dead or cancelled jobs and long-delayed queued jobs among those old ids are
--           walked past each round.
-- Locks:    the advisory lock and the requeued and deleted rows, until the caller's
--           transaction ends.
-- States:   running -> queued or dead (expired leases); removes done/cancelled/dead rows.
-- Time:     now() (transaction start).
-- Errors:   22023 when max_jobs is NULL or < 1; 23503 when a row of another table still
--           references a job being pruned through a foreign key without ON DELETE.
CREATE OR REPLACE FUNCTION jobs_maintain(max_jobs integer DEFAULT 10000)
RETURNS jobs_maintenance
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    v_result   jobs_maintenance;
    v_settings jobs_settings;
    v_cutoff   timestamptz;
    v_lo       bigint;
    v_hi       bigint;
    v_mid      bigint;
    v_created  timestamptz;
BEGIN
    IF jobs_maintain.max_jobs IS NULL OR jobs_maintain.max_jobs < 1 THEN
        PERFORM _jobs_invalid('jobs_maintain', 'max_jobs', 'must be at least 1');
    END IF;

    v_result := ROW(false, 0, 0, 0, 0, false);
    -- The first key names skiplock, the second this install (the function's own oid).
    IF NOT pg_try_advisory_xact_lock(hashtext('skiplock.jobs_maintain'),
                                     'jobs_maintain(integer)'::regprocedure::oid::integer) THEN
        RETURN v_result;
    END IF;
    v_result.ran := true;

    v_result.requeued := jobs_requeue_expired();

    SELECT * INTO v_settings FROM jobs_settings;

    IF v_settings.done_retention IS NOT NULL THEN
        v_cutoff := now() - v_settings.done_retention;
        -- Binary search over jobs_pkey for the lowest id at or after which jobs were created
        -- at or after the cutoff: no job from there on can have finished before it (up to
        -- ids handed out out of created_at order by concurrent transactions; those are
        -- reached by a later round).
        SELECT min(j.id), max(j.id) + 1 INTO v_lo, v_hi FROM jobs j;
        WHILE v_lo < v_hi LOOP
            v_mid := v_lo + (v_hi - v_lo) / 2;
            SELECT j.created_at INTO v_created
            FROM jobs j
            WHERE j.id >= v_mid
            ORDER BY j.id
            LIMIT 1;
            IF v_created >= v_cutoff THEN
                v_hi := v_mid;
            ELSE
                v_lo := v_mid + 1;
            END IF;
        END LOOP;

        IF v_lo IS NOT NULL THEN
            WITH doomed AS (
                SELECT j.id
                FROM jobs j
                WHERE j.id < v_lo
                  AND j.state = 'done'
                  AND j.finished_at < v_cutoff
                ORDER BY j.id
                LIMIT jobs_maintain.max_jobs
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM jobs j
            WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
            GET DIAGNOSTICS v_result.pruned_done = ROW_COUNT;
        END IF;
    END IF;

    IF v_settings.cancelled_retention IS NOT NULL THEN
        WITH doomed AS (
            SELECT j.id
            FROM jobs j
            WHERE j.state = 'cancelled'
              AND j.finished_at < now() - v_settings.cancelled_retention
            ORDER BY j.finished_at
            LIMIT jobs_maintain.max_jobs
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM jobs j
        WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
        GET DIAGNOSTICS v_result.pruned_cancelled = ROW_COUNT;
    END IF;

    IF v_settings.dead_retention IS NOT NULL THEN
        WITH doomed AS (
            SELECT j.id
            FROM jobs j
            WHERE j.state = 'dead'
              AND j.finished_at < now() - v_settings.dead_retention
            ORDER BY j.finished_at
            LIMIT jobs_maintain.max_jobs
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM jobs j
        WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
        GET DIAGNOSTICS v_result.pruned_dead = ROW_COUNT;
    END IF;

    v_result.more := jobs_maintain.max_jobs IN (v_result.pruned_done, v_result.pruned_cancelled, v_result.pruned_dead);
    RETURN v_result;
END;
$$;

COMMENT ON FUNCTION jobs_maintain(integer) IS
    'skiplock: one round of housekeeping (requeue expired leases, prune by jobs_settings retention); one session at a time, others return ran = false.';
