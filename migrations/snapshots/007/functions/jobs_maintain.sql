-- jobs_maintain: one bounded round of housekeeping; returns what it did.
--
-- Promises: takes back expired leases (jobs_requeue_expired), removes up to max_jobs key
--           rows whose unique_for period is over (jobs_enqueue), then deletes the done,
--           cancelled and dead jobs whose finished_at is older than that state's retention
--           in jobs_settings (done_retention, cancelled_retention, dead_retention; NULL
--           keeps the state forever), at most max_jobs of each state per round, oldest
--           first. Returns one row: ran (false when another session's round was in
--           progress: nothing was done), requeued, pruned_done, pruned_cancelled,
--           pruned_dead, and more (a prune's batch was full and it deleted something: call
--           again to catch up).
--           Every Go client calls it every Config.RequeueInterval, again at once while more
--           is true; psql users schedule it (docs/operations.md).
-- Pruning never stops the requeue: each state's prune runs in a subtransaction of its own,
--           and a failure there becomes a WARNING and a count of 0 for that state, so the
--           requeue, the other states and the next rounds go on. A job that a row of another
--           table still references through a foreign key without ON DELETE is left in place
--           (the batch is bisected to delete the rest, about 2 log2(max_jobs) extra tries
--           per referenced job), with a WARNING saying how many and naming one constraint;
--           such a foreign key should be ON DELETE CASCADE or SET NULL, or the state's
--           retention NULL (docs/operations.md, Retention).
-- No leader, no work done twice: a round holds a transaction-level advisory lock
--           (pg_try_advisory_xact_lock, keyed by this function's oid, so every install
--           schema has its own); a caller that does not get it returns at once with
--           ran = false instead of repeating or waiting for the round in progress. The rows
--           it deletes are also taken with SKIP LOCKED, so jobs_prune, jobs_delete_many or a
--           worker holding a row never make it wait.
-- Cost:     nothing due: a few index probes. Dead and cancelled jobs are found through
--           jobs_dead_cancelled. Done jobs have no index of their own (completions
--           would pay for it): they are read along jobs_pkey from the lowest id up to the
--           first job created after the cutoff (found by a binary search over jobs_pkey,
--           as ids grow with created_at and a job cannot finish before it was created), so
--           the walk covers the jobs old enough to be due, not the recent ones. Retained
--           dead or cancelled jobs and long-delayed queued jobs among those old ids are
--           walked past each round. When completions delete the job instead
--           (_jobs_completion_deletes: done_retention 0), every live job is older than the
--           cutoff, and the only done rows left are those completed before the switch,
--           mostly the lowest ids: the walk then covers the lowest max_jobs ids only, not
--           every queued and running job, and when those hold no done row due, max_jobs
--           ids from a random one below the cutoff's: a done row behind more than max_jobs
--           kept jobs (dead ones without a retention, long-delayed queued ones) is reached
--           within a few rounds (on average (jobs below the cutoff) / max_jobs of them).
-- Locks:    the advisory lock and the requeued and deleted rows, until the caller's
--           transaction ends.
-- States:   running -> queued or dead (expired leases); removes done/cancelled/dead rows.
-- Time:     now() (transaction start).
-- Errors:   22023 when max_jobs is NULL or < 1. Nothing from pruning (WARNINGs instead).
CREATE OR REPLACE FUNCTION jobs_maintain(max_jobs integer DEFAULT 10000)
RETURNS jobs_maintenance
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    v_result     jobs_maintenance;
    v_settings   jobs_settings;
    v_state      jobs_state;
    v_retention  interval;
    v_cutoff     timestamptz;
    v_lo         bigint;
    v_hi         bigint;
    v_mid        bigint;
    v_from       bigint;
    v_created    timestamptz;
    v_doomed     bigint[];
    v_pruned     integer;
    v_count      integer;
    v_firsts     integer[];
    v_lasts      integer[];
    v_first      integer;
    v_last       integer;
    v_referenced integer := 0;
    v_reference  text;
    v_message    text;
    v_detail     text;
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

    -- The unique_for periods that are over: their keys' rows (an enqueue would take them
    -- over anyway; this keeps the table to the keys still taken). A full batch asks for
    -- another round.
    DELETE FROM jobs_unique_keys k
    WHERE k.ctid = ANY (ARRAY(
            SELECT h.ctid
            FROM jobs_unique_keys h
            WHERE h.held_until IS NOT NULL AND h.held_until <= now()
            ORDER BY h.held_until
            LIMIT jobs_maintain.max_jobs
            FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_result.more := v_count = jobs_maintain.max_jobs;

    SELECT * INTO v_settings FROM jobs_settings;

    FOREACH v_state IN ARRAY ARRAY['done', 'cancelled', 'dead']::jobs_state[] LOOP
        v_retention := CASE v_state
                           WHEN 'done' THEN v_settings.done_retention
                           WHEN 'cancelled' THEN v_settings.cancelled_retention
                           ELSE v_settings.dead_retention
                       END;
        CONTINUE WHEN v_retention IS NULL;
        v_cutoff := now() - v_retention;
        v_doomed := '{}';
        v_pruned := 0;

        -- Each state's prune in a block of its own (a subtransaction): whatever makes it fail
        -- must not undo the requeue above, the one path that takes back expired leases (the
        -- driver calls nothing else), nor the other states' prunes.
        BEGIN
            IF v_state = 'done' THEN
                -- Binary search over jobs_pkey for the lowest id at or after which jobs were
                -- created at or after the cutoff: no job from there on can have finished
                -- before it (up to ids handed out out of created_at order by concurrent
                -- transactions; those are reached by a later round).
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
            END IF;

            BEGIN
                IF v_state = 'done' AND _jobs_completion_deletes() THEN
                    -- Done rows only from before completions deleted (and from completions
                    -- that ran while the setting changed): mostly the lowest ids. A bounded
                    -- window of max_jobs ids, so that a backlog of live jobs is not walked
                    -- each round: the lowest ids first; when they hold nothing to prune, the
                    -- window starts at a random id below v_lo instead, so that done rows
                    -- behind more than max_jobs kept jobs (dead ones without a retention,
                    -- long-delayed queued ones) are reached too, within a few rounds.
                    v_from := NULL;
                    LOOP
                        v_doomed := ARRAY(
                            SELECT j.id
                            FROM jobs j
                            WHERE j.id = ANY (ARRAY(
                                    SELECT w.id
                                    FROM (SELECT j2.id, j2.state, j2.finished_at
                                          FROM jobs j2
                                          WHERE j2.id < v_lo
                                            AND j2.id >= coalesce(v_from, -9223372036854775807)
                                          ORDER BY j2.id
                                          LIMIT jobs_maintain.max_jobs) w
                                    WHERE w.state = 'done'
                                      AND w.finished_at < v_cutoff))
                              AND j.state = 'done'
                              AND j.finished_at < v_cutoff
                              AND ((j.workflow_id IS NULL AND j.has_children IS NULL)
                                   OR _jobs_prunable(j.id, j.workflow_id, j.has_children, v_cutoff))
                            ORDER BY j.id
                            FOR UPDATE SKIP LOCKED);
                        EXIT WHEN cardinality(v_doomed) > 0 OR v_from IS NOT NULL;
                        SELECT min(j.id) INTO v_from FROM jobs j;
                        EXIT WHEN v_from IS NULL OR v_lo IS NULL; -- no jobs
                        v_from := v_from + floor(random() * (v_lo - v_from))::bigint;
                    END LOOP;
                ELSIF v_state = 'done' THEN
                    v_doomed := ARRAY(
                        SELECT j.id
                        FROM jobs j
                        WHERE j.id < v_lo
                          AND j.state = 'done'
                          AND j.finished_at < v_cutoff
                          AND ((j.workflow_id IS NULL AND j.has_children IS NULL)
                               OR _jobs_prunable(j.id, j.workflow_id, j.has_children, v_cutoff))
                        ORDER BY j.id
                        LIMIT jobs_maintain.max_jobs
                        FOR UPDATE SKIP LOCKED);
                ELSIF v_state = 'cancelled' THEN
                    v_doomed := ARRAY(
                        SELECT l.id
                        FROM jobs_dead_cancelled d
                        CROSS JOIN LATERAL (
                            SELECT j.id
                            FROM jobs j
                            WHERE j.id = d.id
                              AND j.state = 'cancelled'
                              AND j.finished_at < v_cutoff
                              AND ((j.workflow_id IS NULL AND j.has_children IS NULL)
                                   OR _jobs_prunable(j.id, j.workflow_id, j.has_children, v_cutoff))
                            FOR UPDATE SKIP LOCKED
                        ) AS l
                        WHERE d.state = 'cancelled'
                          AND d.finished_at < v_cutoff
                        ORDER BY d.finished_at
                        LIMIT jobs_maintain.max_jobs);
                ELSE
                    v_doomed := ARRAY(
                        SELECT l.id
                        FROM jobs_dead_cancelled d
                        CROSS JOIN LATERAL (
                            SELECT j.id
                            FROM jobs j
                            WHERE j.id = d.id
                              AND j.state = 'dead'
                              AND j.finished_at < v_cutoff
                              AND ((j.workflow_id IS NULL AND j.has_children IS NULL)
                                   OR _jobs_prunable(j.id, j.workflow_id, j.has_children, v_cutoff))
                            FOR UPDATE SKIP LOCKED
                        ) AS l
                        WHERE d.state = 'dead'
                          AND d.finished_at < v_cutoff
                        ORDER BY d.finished_at
                        LIMIT jobs_maintain.max_jobs);
                END IF;
                DELETE FROM jobs j
                WHERE j.id = ANY (v_doomed);
                GET DIAGNOSTICS v_pruned = ROW_COUNT;
            EXCEPTION WHEN foreign_key_violation THEN
                -- Rows of another table reference some of the batch through a foreign key
                -- without ON DELETE. The batch's row locks went with the subtransaction;
                -- v_doomed, a variable, stays. Bisect it: a half that deletes cleanly stays
                -- deleted, a half that fails is split again, and a single referenced job is
                -- left in place. For k referenced jobs in a batch of n that is about
                -- 2k log2(n/k) tries, each a subtransaction that locks and deletes its rows
                -- itself (a lock taken in another subtransaction would make every delete
                -- create a MultiXact); the failed ones give back their subtransaction ids,
                -- so the kept ones stay few (PostgreSQL caches 64 per transaction before
                -- other sessions' snapshots get slower). The referenced jobs come first again
                -- in the next round's batch, so pruning goes on past them as long as fewer
                -- than max_jobs of them are due.
                v_firsts := ARRAY[1];
                v_lasts := ARRAY[cardinality(v_doomed)];
                WHILE cardinality(v_firsts) > 0 LOOP
                    v_first := v_firsts[cardinality(v_firsts)];
                    v_last := v_lasts[cardinality(v_lasts)];
                    v_firsts := v_firsts[1:cardinality(v_firsts) - 1];
                    v_lasts := v_lasts[1:cardinality(v_lasts) - 1];
                    BEGIN
                        WITH doomed AS (
                            -- Taken again: the job may have changed since (jobs_retry_many).
                            SELECT j.id
                            FROM jobs j
                            WHERE j.id = ANY (v_doomed[v_first:v_last])
                              AND j.state = v_state
                              AND j.finished_at < v_cutoff
                              AND ((j.workflow_id IS NULL AND j.has_children IS NULL)
                                   OR _jobs_prunable(j.id, j.workflow_id, j.has_children, v_cutoff))
                            FOR UPDATE SKIP LOCKED
                        )
                        DELETE FROM jobs j
                        WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
                        GET DIAGNOSTICS v_count = ROW_COUNT;
                        v_pruned := v_pruned + v_count;
                    EXCEPTION WHEN foreign_key_violation THEN
                        IF v_first = v_last THEN
                            v_referenced := v_referenced + 1;
                            GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
                            v_reference := v_message || '. ' || coalesce(v_detail, '');
                        ELSE
                            v_mid := v_first + (v_last - v_first) / 2;
                            v_firsts := v_firsts || ARRAY[(v_mid + 1)::integer, v_first];
                            v_lasts := v_lasts || ARRAY[v_last, v_mid::integer];
                        END IF;
                    END;
                END LOOP;
            END;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
            RAISE WARNING 'jobs_maintain: pruning % jobs failed (SQLSTATE %): %', v_state, SQLSTATE, v_message
                USING DETAIL = coalesce(v_detail, ''),
                      HINT = 'The round went on: expired leases were requeued and the other states pruned.';
            v_pruned := 0;
        END;

        CASE v_state
            WHEN 'done' THEN v_result.pruned_done := v_pruned;
            WHEN 'cancelled' THEN v_result.pruned_cancelled := v_pruned;
            ELSE v_result.pruned_dead := v_pruned;
        END CASE;
        -- A full batch that deleted something: more may be due. A full batch of referenced
        -- jobs only would come back the same at once, so it does not ask for another round.
        v_result.more := v_result.more OR (cardinality(v_doomed) = jobs_maintain.max_jobs AND v_pruned > 0);
    END LOOP;

    IF v_referenced > 0 THEN
        RAISE WARNING 'jobs_maintain: % jobs past their retention were left in place: rows of other tables reference them', v_referenced
            USING DETAIL = v_reference,
                  HINT = 'Declare foreign keys to jobs (id) ON DELETE CASCADE or ON DELETE SET NULL, or set that state''s retention in jobs_settings to NULL.';
    END IF;

    RETURN v_result;
END;
$$;

COMMENT ON FUNCTION jobs_maintain(integer) IS
    'skiplock: one round of housekeeping (requeue expired leases, prune by jobs_settings retention); one session at a time, others return ran = false.';
