-- jobs_list: one page of jobs, newest first, for operators' tools (the CLI, the dashboard).
--
-- Promises: at most max_jobs rows of jobs_listed (every column but the payload and the error
--           history; last_error in full), in id order descending, of the jobs matching every
--           non-NULL filter (state, queue, kind) with id < before_id when before_id is given.
--           Keyset paging: the next page passes the last id of this one as before_id, so a
--           page costs the same however deep it is, and jobs enqueued meanwhile do not shift
--           it. No rows when nothing matches. Use jobs_get or the jobs table for one job's
--           payload and errors.
-- Cost:     planned for each call's arguments (plan_cache_mode = force_custom_plan).
--           Queued jobs are read from jobs_queued (jobs_ready_idx), running ones from the
--           jobs listed by jobs_claims, dead and cancelled ones from jobs_dead_cancelled
--           (its primary key backwards, or jobs_dead_cancelled_idx), waiting ones through
--           their unresolved jobs_dependencies rows, sorting the few found;
--           done jobs and no state filter walk jobs_pkey backwards. Under 200 ms for every state filter with 1,000,000 done jobs
--           (tests/sqltest/list_test.go). A rare queue or kind without a state filter may
--           walk many done rows: filter by state too.
-- Locks:    none (a plain read). States: none.
-- Errors:   22023 when max_jobs is NULL or outside 1..1000.
CREATE OR REPLACE FUNCTION jobs_list(
    state     jobs_state DEFAULT NULL,
    queue     text       DEFAULT NULL,
    kind      text       DEFAULT NULL,
    max_jobs  integer    DEFAULT 50,
    before_id bigint     DEFAULT NULL
)
RETURNS SETOF jobs_listed
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan
-- Never worth compiling: a few index probes, but the estimates of the small tables that list
-- jobs (before their first ANALYZE) can lift the plan's cost past jit_above_cost, and the
-- compilation then took 0.8 s of a 2 ms call.
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_list.max_jobs IS NULL OR jobs_list.max_jobs < 1 OR jobs_list.max_jobs > 1000 THEN
        PERFORM _jobs_invalid('jobs_list', 'max_jobs', 'must be between 1 and 1000');
    END IF;

    -- With custom plans every argument is a constant: "NULL IS NULL OR ..." folds away.
    -- Queued, running, dead and cancelled jobs are read from the tables that list them
    -- (jobs_queued, jobs_claims, jobs_dead_cancelled), never walking the done ones.
    IF jobs_list.state = 'queued' THEN
        RETURN QUERY
        SELECT j.id, j.queue, j.kind, j.state, j.priority, j.attempts, j.max_attempts, j.run_at,
               j.created_at, j.started_at, j.finished_at, j.lease_holder, j.lease_expires_at,
               j.unique_key, j.concurrency_key, j.last_error, j.progress, j.workflow_id
        FROM jobs_queued q
        -- One primary-key probe per listed job, whatever the statistics (OFFSET 0 keeps
        -- the planner from joining the tables another way).
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = q.id OFFSET 0) j
        WHERE (jobs_list.queue IS NULL OR q.queue = jobs_list.queue)
          AND (jobs_list.before_id IS NULL OR q.id < jobs_list.before_id)
          AND j.state = 'queued'
          AND (jobs_list.queue IS NULL OR j.queue = jobs_list.queue)
          AND (jobs_list.kind IS NULL OR j.kind = jobs_list.kind)
          AND (jobs_list.before_id IS NULL OR j.id < jobs_list.before_id)
        ORDER BY q.id DESC
        LIMIT jobs_list.max_jobs;
    ELSIF jobs_list.state = 'running' THEN
        RETURN QUERY
        SELECT j.id, j.queue, j.kind, j.state, j.priority, j.attempts, j.max_attempts, j.run_at,
               j.created_at, j.started_at, j.finished_at, j.lease_holder, j.lease_expires_at,
               j.unique_key, j.concurrency_key, j.last_error, j.progress, j.workflow_id
        FROM jobs_claims c
        CROSS JOIN LATERAL unnest(c.ids) AS u(id)
        -- One primary-key probe per listed job, whatever the statistics (OFFSET 0 keeps
        -- the planner from joining the tables another way).
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = u.id OFFSET 0) j
        WHERE (jobs_list.queue IS NULL OR c.queue = jobs_list.queue)
          AND j.claim_id = c.claim_id
          AND j.state = 'running'
          AND (jobs_list.queue IS NULL OR j.queue = jobs_list.queue)
          AND (jobs_list.kind IS NULL OR j.kind = jobs_list.kind)
          AND (jobs_list.before_id IS NULL OR j.id < jobs_list.before_id)
        ORDER BY j.id DESC
        LIMIT jobs_list.max_jobs;
    ELSIF jobs_list.state IN ('dead', 'cancelled') THEN
        RETURN QUERY
        SELECT j.id, j.queue, j.kind, j.state, j.priority, j.attempts, j.max_attempts, j.run_at,
               j.created_at, j.started_at, j.finished_at, j.lease_holder, j.lease_expires_at,
               j.unique_key, j.concurrency_key, j.last_error, j.progress, j.workflow_id
        FROM jobs_dead_cancelled d
        -- One primary-key probe per listed job, whatever the statistics (OFFSET 0 keeps
        -- the planner from joining the tables another way).
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = d.id OFFSET 0) j
        WHERE d.state = jobs_list.state
          AND (jobs_list.queue IS NULL OR d.queue = jobs_list.queue)
          AND (jobs_list.before_id IS NULL OR d.id < jobs_list.before_id)
          AND j.state = jobs_list.state
          AND (jobs_list.queue IS NULL OR j.queue = jobs_list.queue)
          AND (jobs_list.kind IS NULL OR j.kind = jobs_list.kind)
          AND (jobs_list.before_id IS NULL OR j.id < jobs_list.before_id)
        ORDER BY d.id DESC
        LIMIT jobs_list.max_jobs;
    ELSIF jobs_list.state = 'waiting' THEN
        -- Each waiting job has an unresolved jobs_dependencies row.
        RETURN QUERY
        SELECT j.id, j.queue, j.kind, j.state, j.priority, j.attempts, j.max_attempts, j.run_at,
               j.created_at, j.started_at, j.finished_at, j.lease_holder, j.lease_expires_at,
               j.unique_key, j.concurrency_key, j.last_error, j.progress, j.workflow_id
        FROM (SELECT DISTINCT d.child_id AS id FROM jobs_dependencies d
              WHERE NOT d.resolved
                AND (jobs_list.before_id IS NULL OR d.child_id < jobs_list.before_id)) AS w
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = w.id OFFSET 0) j
        WHERE j.state = 'waiting'
          AND (jobs_list.queue IS NULL OR j.queue = jobs_list.queue)
          AND (jobs_list.kind IS NULL OR j.kind = jobs_list.kind)
        ORDER BY j.id DESC
        LIMIT jobs_list.max_jobs;
    ELSE
        RETURN QUERY
        SELECT j.id, j.queue, j.kind, j.state, j.priority, j.attempts, j.max_attempts, j.run_at,
               j.created_at, j.started_at, j.finished_at, j.lease_holder, j.lease_expires_at,
               j.unique_key, j.concurrency_key, j.last_error, j.progress, j.workflow_id
        FROM jobs j
        WHERE (jobs_list.state IS NULL OR j.state = jobs_list.state)
          AND (jobs_list.queue IS NULL OR j.queue = jobs_list.queue)
          AND (jobs_list.kind IS NULL OR j.kind = jobs_list.kind)
          AND (jobs_list.before_id IS NULL OR j.id < jobs_list.before_id)
        ORDER BY j.id DESC
        LIMIT jobs_list.max_jobs;
    END IF;
END;
$$;

COMMENT ON FUNCTION jobs_list(jobs_state, text, text, integer, bigint) IS
    'skiplock: one page of jobs (no payload), newest first, filtered by state, queue and kind; keyset paging with before_id.';
