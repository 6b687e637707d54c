-- jobs_retry_many: jobs_retry for every job matching the filters, at most max_jobs per call.
--
-- Promises: the jobs that match every non-NULL filter (ids: any of these ids; queue; kind;
--           states, a subset of dead and cancelled) are retried as jobs_retry retries one:
--           back to queued (waiting while a parent is unfinished; descendants their end
--           cancelled come back to waiting) with run_at = now(), max_attempts raised to attempts + 1 when
--           needed, attempts, last_error and errors kept. At most max_jobs jobs per call;
--           returns how many. A job with a unique_key that a live (waiting, queued or running) job of
--           its queue holds is left alone and not counted (jobs_retry would raise 23505), as
--           are all but the lowest id of matching jobs sharing a key, so a call never fails
--           for a key: that includes a key another transaction takes while the call runs (an
--           open enqueue, jobs_retry or concurrent jobs_retry_many of the same key: the call
--           waits for it, and leaves the job if it commits). NOTIFYs jobs_ready once per queue
--           that got jobs back.
--           To retry everything that matches, call it until it returns 0 (docs/sql-api.md).
--           A job waiting for a parent that ended dead or cancelled is left alone too (it
--           would wait forever): retrying that parent brings it back.
--           Jobs jobs_retry refuses (55000) are left alone and not counted, so a call never
--           fails for one of them and a drain loop ends: on a shard, jobs whose id does not
--           carry the shard number (created before jobs_set_shard; a router would send their
--           completion elsewhere), and jobs whose attempts are at 2147483647. A call that
--           picks fewer than max_jobs (the last of a drain loop) reports them: a WARNING for
--           each kind, with how many match the filters and the lowest such id.
-- Safe while workers run: rows are taken FOR NO KEY UPDATE SKIP LOCKED, so the call never
--           waits for a row lock: it cannot deadlock with claims, completions, jobs_prune,
--           jobs_maintain or another bulk action, and a row locked by someone else is left
--           for the next call of the drain loop. (Waiting in id order would also avoid
--           deadlocks, but would stall behind a handler's open CompleteTx transaction.) The
--           one wait left is on unique keys: while another transaction holds a retried job's
--           unique_key uncommitted, jobs_unique_keys makes the call wait for it. The keyed
--           jobs are first retried in one statement that gives up at the first such wait
--           (lock_timeout 1 ms) or 23505; then one at a time in (queue, unique_key) order,
--           the order jobs_enqueue_many inserts keys in, so two calls, or a call and a batch,
--           wait for each other in one direction only: no deadlock. (A transaction that
--           takes keys in another order, e.g. enqueues 'b' then 'a' in two statements, can
--           still deadlock with it, as with any two such transactions.) Subtransactions: one
--           for the first statement, then one per chunk of at least 1000 keyed jobs (at most
--           about 32 that commit), never one per job.
-- Cost:     the states are read from jobs_dead_cancelled (never the done jobs); ids read
--           its primary key.
--           Planned for each call's arguments (plan_cache_mode = force_custom_plan), so a
--           NULL filter costs nothing. Jobs without a key take one UPDATE, keyed jobs one
--           more; only when another transaction holds one of their keys, one UPDATE each.
--           A call that picks fewer than max_jobs reads the matching jobs once more, for its
--           WARNINGs.
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
    v_picked       bigint[];
    v_keyed        bigint[];
    v_key_queues   text[];
    v_keys         text[];
    v_skipped      bigint[] := '{}';
    v_count        integer;
    v_queues       text[];
    v_queue        text;
    v_chunk        integer;
    v_from         integer;
    v_to           integer;
    v_i            integer;
    v_id           bigint;
    v_key_queue    text;
    v_key          text;
    v_chunk_count  integer;
    v_chunk_queues text[];
    v_failed       boolean;
    v_lock_timeout text;
    v_shard        integer;
    v_strays       bigint;
    v_first_stray  bigint;
    v_maxed        bigint;
    v_first_maxed  bigint;
BEGIN
    PERFORM _jobs_check_bulk_args('jobs_retry_many', jobs_retry_many.states, '{dead, cancelled}',
                                  jobs_retry_many.max_jobs);

    v_picked := ARRAY(
        SELECT p.id
        FROM jobs_dead_cancelled d
        -- One primary-key probe per listed job (the row lock keeps the subquery a probe).
        CROSS JOIN LATERAL (
            SELECT j.id
            FROM jobs j
            WHERE j.id = d.id
              AND j.state IN ('dead', 'cancelled')
              AND j.state = ANY (jobs_retry_many.states)
              AND (jobs_retry_many.kind IS NULL OR j.kind = jobs_retry_many.kind)
              -- A key a live job holds cannot be retried now; skipping it here (not just in
              -- the update) lets a drain loop end instead of picking the same jobs forever.
              -- A unique_for period held by the job's own end, or one that is over, gives way.
              AND (j.unique_key IS NULL OR NOT EXISTS (
                      SELECT FROM jobs_unique_keys l
                      WHERE l.queue = j.queue
                        AND l.unique_key = j.unique_key
                        AND NOT (l.held_until IS NOT NULL AND (l.id = j.id OR l.held_until <= now()))))
              -- What jobs_retry refuses: an id a router would send elsewhere, no attempt
              -- left. (The shard is read in this statement, whose snapshot is taken once it
              -- holds its lock on jobs, so a jobs_set_shard committing meanwhile is seen.)
              AND j.id % 1024 = coalesce((SELECT s.shard FROM jobs_settings s), j.id % 1024)
              AND j.attempts < 2147483647
              -- A job whose parent ended dead or cancelled would wait for it forever:
              -- retrying that parent brings the job back (_jobs_revive).
              AND (coalesce(j.pending_parents, 0) = 0 OR NOT EXISTS (
                      SELECT FROM jobs_dependencies pd
                      JOIN jobs pj ON pj.id = pd.parent_id
                      WHERE pd.child_id = j.id
                        AND NOT pd.resolved
                        AND pj.state IN ('dead', 'cancelled')))
            FOR NO KEY UPDATE SKIP LOCKED
        ) AS p
        WHERE d.state = ANY (jobs_retry_many.states)
          AND (jobs_retry_many.ids IS NULL OR d.id = ANY (jobs_retry_many.ids))
          AND (jobs_retry_many.queue IS NULL OR d.queue = jobs_retry_many.queue)
        LIMIT jobs_retry_many.max_jobs);

    -- Reported on the last call of a drain loop only: earlier calls would repeat it, and
    -- this reads every matching job (as the pick of such a call does anyway).
    IF cardinality(v_picked) < jobs_retry_many.max_jobs THEN
        v_shard := (SELECT s.shard FROM jobs_settings s);
        SELECT count(*) FILTER (WHERE v_shard IS NOT NULL AND j.id % 1024 <> v_shard),
               min(j.id) FILTER (WHERE v_shard IS NOT NULL AND j.id % 1024 <> v_shard),
               count(*) FILTER (WHERE j.attempts >= 2147483647),
               min(j.id) FILTER (WHERE j.attempts >= 2147483647)
        INTO v_strays, v_first_stray, v_maxed, v_first_maxed
        FROM jobs_dead_cancelled d
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = d.id OFFSET 0) j
        WHERE d.state = ANY (jobs_retry_many.states)
          AND (jobs_retry_many.ids IS NULL OR d.id = ANY (jobs_retry_many.ids))
          AND (jobs_retry_many.queue IS NULL OR d.queue = jobs_retry_many.queue)
          AND j.state IN ('dead', 'cancelled')
          AND j.state = ANY (jobs_retry_many.states)
          AND (jobs_retry_many.ids IS NULL OR j.id = ANY (jobs_retry_many.ids))
          AND (jobs_retry_many.queue IS NULL OR j.queue = jobs_retry_many.queue)
          AND (jobs_retry_many.kind IS NULL OR j.kind = jobs_retry_many.kind)
          AND ((v_shard IS NOT NULL AND j.id % 1024 <> v_shard) OR j.attempts >= 2147483647);
        IF v_strays > 0 THEN
            RAISE WARNING 'jobs_retry_many: left % matching jobs alone (the lowest id %): their ids name another shard than this one, %', v_strays, v_first_stray, v_shard
                USING HINT = 'A router would send their completions to another shard. Enqueue their payloads again to run them here under new ids.';
        END IF;
        IF v_maxed > 0 THEN
            RAISE WARNING 'jobs_retry_many: left % matching jobs alone (the lowest id %): no attempt left, attempts is at its limit, 2147483647', v_maxed, v_first_maxed
                USING HINT = 'Enqueue their payloads again to run them under new ids.';
        END IF;
    END IF;

    -- Jobs without a key: one update (through jobs_pkey).
    WITH retried AS (
        UPDATE jobs j
        SET state = CASE WHEN j.pending_parents > 0 THEN 'waiting' ELSE 'queued' END::jobs_state,
            run_at = now(),
            max_attempts = greatest(j.max_attempts, j.attempts + 1),
            finished_at = NULL,
            cancelled_by = NULL
        WHERE j.id = ANY (v_picked)
          AND j.unique_key IS NULL
          AND j.state IN ('dead', 'cancelled')
        RETURNING j.queue
    )
    SELECT count(*), coalesce(array_agg(DISTINCT r.queue), '{}') INTO v_count, v_queues
    FROM retried r;

    -- Jobs with a key: the lowest id of each (queue, unique_key) among the picked. Queued
    -- again, a job's key goes back into jobs_unique_keys (trigger jobs_unique_key_sync),
    -- which makes the update wait while another
    -- transaction holds the same key uncommitted (an enqueue, a jobs_retry, another call's
    -- retry), then fail with 23505 if that one commits. Two updates taking keys in different
    -- orders can wait for each other: a deadlock.
    SELECT coalesce(array_agg(k.id ORDER BY k.queue, k.unique_key), '{}'),
           array_agg(k.queue ORDER BY k.queue, k.unique_key),
           array_agg(k.unique_key ORDER BY k.queue, k.unique_key)
    INTO v_keyed, v_key_queues, v_keys
    FROM (
        SELECT min(j.id) AS id, j.queue, j.unique_key
        FROM jobs j
        WHERE j.id = ANY (v_picked)
          AND j.unique_key IS NOT NULL
        GROUP BY j.queue, j.unique_key
    ) AS k;

    -- First all at once, in a subtransaction that gives up at the first wait (lock_timeout
    -- 1 ms, far below deadlock_timeout, so it cannot take part in a deadlock) or the first
    -- 23505: the usual case, where no one else touches these keys right now, costs one
    -- statement. (The setting goes back with the subtransaction when it fails.)
    v_failed := false;
    IF cardinality(v_keyed) > 0 THEN
        v_lock_timeout := current_setting('lock_timeout');
        BEGIN
            PERFORM set_config('lock_timeout', '1ms', true);
            WITH retried AS (
                UPDATE jobs j
                SET state = CASE WHEN j.pending_parents > 0 THEN 'waiting' ELSE 'queued' END::jobs_state,
                    run_at = now(),
                    max_attempts = greatest(j.max_attempts, j.attempts + 1),
                    finished_at = NULL,
                    cancelled_by = NULL
                WHERE j.id = ANY (v_keyed)
                  AND j.state IN ('dead', 'cancelled')
                RETURNING j.queue
            )
            SELECT count(*), coalesce(array_agg(DISTINCT r.queue), '{}') INTO v_chunk_count, v_chunk_queues
            FROM retried r;
            PERFORM set_config('lock_timeout', v_lock_timeout, true);
            v_count := v_count + v_chunk_count;
            v_queues := v_queues || v_chunk_queues;
        EXCEPTION WHEN unique_violation OR lock_not_available THEN
            v_failed := true;
        END;
    END IF;

    -- Otherwise one at a time, in (queue, unique_key) order, waiting as long as it takes: two
    -- calls, or a call and jobs_enqueue_many (which inserts keys in the same order), then
    -- wait for each other in one direction only and cannot deadlock. A key taken meanwhile
    -- leaves its job alone: a live job that committed since the pick is seen before the
    -- update; a 23505 after a wait is caught. That takes subtransactions, one per chunk of
    -- jobs rather than one per job, as PostgreSQL caches only 64 subtransaction ids per
    -- transaction (beyond that, every other session's snapshots get slower while this
    -- transaction runs; a chunk that fails gives its ids back). A 23505 undoes its chunk,
    -- which is done again without the job whose key was taken.
    IF v_failed THEN
        -- Planned once for all jobs (the function is planned per call for the filters).
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
        -- At most about 32 chunks that commit, however large max_jobs.
        v_chunk := greatest(1000, cardinality(v_keyed) / 32 + 1);
        v_from := 1;
        WHILE v_from <= cardinality(v_keyed) LOOP
            v_to := least(v_from + v_chunk - 1, cardinality(v_keyed));
            v_chunk_count := 0;
            v_chunk_queues := '{}';
            v_failed := false;
            BEGIN
                v_i := v_from;
                WHILE v_i <= v_to LOOP
                    -- Scalars of their own: a statement given v_keyed[v_i] would get the
                    -- whole array each time.
                    v_id := v_keyed[v_i];
                    v_key_queue := v_key_queues[v_i];
                    v_key := v_keys[v_i];
                    IF NOT v_id = ANY (v_skipped) THEN
                        UPDATE jobs j
                        SET state = CASE WHEN j.pending_parents > 0 THEN 'waiting' ELSE 'queued' END::jobs_state,
                            run_at = now(),
                            max_attempts = greatest(j.max_attempts, j.attempts + 1),
                            finished_at = NULL,
                            cancelled_by = NULL
                        WHERE j.id = v_id
                          AND j.state IN ('dead', 'cancelled')
                          AND NOT EXISTS (
                              SELECT FROM jobs_unique_keys l
                              WHERE l.queue = v_key_queue
                                AND l.unique_key = v_key
                                AND NOT (l.held_until IS NOT NULL AND (l.id = j.id OR l.held_until <= now())))
                        RETURNING j.queue INTO v_queue;
                        IF FOUND THEN
                            v_chunk_count := v_chunk_count + 1;
                            IF NOT v_queue = ANY (v_chunk_queues) THEN
                                v_chunk_queues := v_chunk_queues || v_queue;
                            END IF;
                        END IF;
                    END IF;
                    v_i := v_i + 1;
                END LOOP;
            EXCEPTION WHEN unique_violation THEN
                -- Variables keep their values: v_id is the job whose key was taken.
                v_skipped := v_skipped || v_id;
                v_failed := true;
            END;
            IF NOT v_failed THEN
                v_count := v_count + v_chunk_count;
                v_queues := v_queues || v_chunk_queues;
                v_from := v_to + 1;
            END IF;
        END LOOP;
    END IF;

    -- Descendants their end had cancelled come back to waiting.
    PERFORM _jobs_revive(ARRAY(SELECT j.id FROM jobs j WHERE j.id = ANY (v_picked) AND j.has_children
                                 AND j.state NOT IN ('done', 'dead', 'cancelled') ORDER BY j.id));

    PERFORM pg_notify('jobs_ready', q.queue)
    FROM (SELECT DISTINCT u.queue FROM unnest(v_queues) AS u(queue)) AS q;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_retry_many(bigint[], text, text, jobs_state[], integer) IS
    'skiplock: jobs_retry for up to max_jobs jobs matching the filters (default: dead jobs); skips locked rows; returns the count.';
