-- jobs_complete_many: the batch form of jobs_complete; returns the ids it completed.
--
-- Promises: for each (ids[i], attempts[i]) the same fenced rule as jobs_complete (the
--           attempt and the lease's login); pairs whose job the caller no longer holds at
--           that attempt are left alone and missing from the result.
--           A duplicate pair counts once. results (optional, one per pair, NULL for none):
--           each completed job's result, as jobs_complete's result. Completed jobs that
--           others wait for (children, notify_finished) release their children and notify
--           in one step for the whole batch, children locked in id order (_jobs_finished). NOTIFYs jobs_ready at commit for each
--           concurrency-limited or ordered queue (jobs_queues) that got slots back.
--           With jobs_settings.done_retention 0 the completed jobs are deleted instead of
--           kept as done, as jobs_complete does (see _jobs_completion_deletes; jobs others
--           wait for and workflow steps are kept): one DELETE
--           per pair, in id order, each its own fence check and row lock (no separate lock
--           first: one WAL record per job instead of two).
-- Locks:    the completed rows, until the caller's transaction ends. Rows are locked in id
--           order, so two overlapping batches cannot deadlock each other.
-- States:   running -> done; sets finished_at = now(), clears lease_expires_at and
--           lease_role. With
--           done_retention 0: running -> deleted.
-- Time:     now() (transaction start).
-- Errors:   22023 when either array is NULL or multidimensional, their lengths differ, an
--           element is NULL, or there are more than 100000 pairs; when results is not NULL and
--           is multidimensional or its length differs from ids', or a result is larger than
--           1 MB (as text).
CREATE OR REPLACE FUNCTION jobs_complete_many(ids bigint[], attempts integer[], results jsonb[] DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
-- One plan for every batch: PostgreSQL keeps planning a statement anew at each call while its
-- generic plan (costed for 100 pairs) costs more than the custom plans made so far, and
-- workers send batches of every size, many of a few jobs: 0.29 ms of planning per call,
-- more than a small batch's run. The plans do not depend on the arrays' contents (one
-- jobs_pkey probe per pair), so nothing is lost.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_pair     record;
    v_id       bigint;
    v_ids      bigint[];
    v_queue    text;
    v_queues   text[] := '{}';
    v_claim    bigint;
    v_claims   bigint[] := '{}';
    v_waited   boolean;
    v_finished bigint[] := '{}';
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    PERFORM _jobs_check_fence_arrays('jobs_complete_many', jobs_complete_many.ids, jobs_complete_many.attempts);
    IF jobs_complete_many.results IS NOT NULL THEN
        IF array_ndims(jobs_complete_many.results) > 1
           OR coalesce(cardinality(jobs_complete_many.results), 0) <> cardinality(jobs_complete_many.ids) THEN
            PERFORM _jobs_invalid('jobs_complete_many', 'results',
                                  'must be NULL or a one-dimensional array as long as ids');
        END IF;
        IF EXISTS (SELECT FROM unnest(jobs_complete_many.results) AS r WHERE octet_length(r::text) > 1048576) THEN
            PERFORM _jobs_invalid('jobs_complete_many', 'results', 'must hold results of at most 1 MB (as JSON text)');
        END IF;
    END IF;

    IF _jobs_completion_deletes() THEN
        -- Each DELETE finds its row through jobs_pkey, locks it and re-checks the fence on
        -- the latest version (READ COMMITTED), so no lock is taken before it; the loop's
        -- order is the lock order. A job others wait for is kept as done instead.
        FOR v_pair IN
            SELECT DISTINCT ON (t.id, t.attempt) t.id, t.attempt, t.result
            FROM unnest(jobs_complete_many.ids, jobs_complete_many.attempts,
                        coalesce(jobs_complete_many.results, '{}')) AS t(id, attempt, result)
            WHERE t.id IS NOT NULL
            ORDER BY t.id, t.attempt
        LOOP
            DELETE FROM jobs j
            WHERE j.id = v_pair.id
              AND j.attempts = v_pair.attempt
              AND j.state = 'running'
              AND (j.lease_role IS NULL OR j.lease_role = v_login)
              AND j.has_children IS NULL AND j.notify_finished IS NULL AND j.workflow_id IS NULL
            RETURNING j.id, j.queue, j.claim_id INTO v_id, v_queue, v_claim;
            IF NOT FOUND THEN
                UPDATE jobs j
                SET state = 'done',
                    finished_at = now(),
                    lease_expires_at = NULL,
                    lease_role = NULL,
                    result = v_pair.result
                WHERE j.id = v_pair.id
                  AND j.attempts = v_pair.attempt
                  AND j.state = 'running'
                  AND (j.lease_role IS NULL OR j.lease_role = v_login)
                RETURNING j.id, j.queue, j.claim_id, true INTO v_id, v_queue, v_claim, v_waited;
            END IF;
            IF FOUND THEN
                RETURN NEXT v_id;
                v_claims := v_claims || v_claim;
                IF v_queue <> ALL (v_queues) THEN
                    v_queues := v_queues || v_queue;
                END IF;
                IF v_waited THEN
                    v_finished := v_finished || v_id;
                    v_waited := false;
                END IF;
            END IF;
        END LOOP;
        -- Children are job rows: locked before the jobs_claims rows, as everywhere.
        IF cardinality(v_finished) > 0 THEN
            PERFORM _jobs_finished(v_finished);
        END IF;
        PERFORM _jobs_claims_release(v_claims);
        -- Slots of concurrency-limited queues came back: wake the workers waiting for one.
        PERFORM pg_notify('jobs_ready', q.queue)
        FROM jobs_queues q
        WHERE q.queue = ANY (v_queues)
          AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
        RETURN;
    END IF;

    -- Each pair is looked up through jobs_pkey (the LATERAL subquery, which its row lock
    -- keeps from being flattened into a join), in id order, so the cost follows the batch,
    -- not the number of running jobs, whatever plan the statistics suggest.
    WITH held AS (
        SELECT l.id, t.result
        FROM (SELECT t.id, t.attempt, t.result
              FROM unnest(jobs_complete_many.ids, jobs_complete_many.attempts,
                          coalesce(jobs_complete_many.results, '{}')) AS t(id, attempt, result)
              WHERE t.id IS NOT NULL
              ORDER BY t.id) AS t
        CROSS JOIN LATERAL (
            SELECT j.id
            FROM jobs j
            WHERE j.id = t.id
              AND j.attempts = t.attempt
              AND j.state = 'running'
              AND (j.lease_role IS NULL OR j.lease_role = v_login)
            FOR NO KEY UPDATE
        ) AS l
    ), done AS (
        UPDATE jobs j
        SET state = 'done',
            finished_at = now(),
            lease_expires_at = NULL,
            lease_role = NULL,
            result = h.result
        FROM held h
        WHERE j.id = ANY (ARRAY(SELECT held.id FROM held))
          AND h.id = j.id
        RETURNING j.id, j.queue, j.claim_id, j.has_children OR j.notify_finished AS waited
    )
    SELECT coalesce(array_agg(d.id), '{}'), coalesce(array_agg(DISTINCT d.queue), '{}'),
           coalesce(array_agg(d.claim_id), '{}'),
           coalesce(array_agg(d.id ORDER BY d.id) FILTER (WHERE d.waited), '{}')
    INTO v_ids, v_queues, v_claims, v_finished
    FROM done d;

    -- Children are job rows: locked before the jobs_claims rows, as everywhere.
    IF cardinality(v_finished) > 0 THEN
        PERFORM _jobs_finished(v_finished);
    END IF;
    PERFORM _jobs_claims_release(v_claims);
    -- Slots of concurrency-limited queues came back: wake the workers waiting for one.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = ANY (v_queues)
      AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN QUERY SELECT unnest(v_ids);
END;
$$;

COMMENT ON FUNCTION jobs_complete_many(bigint[], integer[], jsonb[]) IS
    'skiplock: jobs_complete for many (id, attempt) pairs, with optional results (deleted with done_retention 0); returns the ids completed.';
