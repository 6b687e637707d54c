-- jobs_list: one page of jobs, newest first, for operators' tools (the CLI, the dashboard).
--
-- Promises: at most max_jobs rows of jobs_listed (every column but the payload and the error
--           history; last_error in full), in id order descending, of the jobs matching every
--           non-NULL filter (state, queue, kind) with id < before_id when before_id is given.
--           Keyset paging: the next page passes the last id of this one as before_id, so a
--           page costs the same however deep it is, and jobs enqueued meanwhile do not shift
--           it. No rows when nothing matches. Use jobs_get or the jobs table for one job's
--           payload and errors.
-- Cost:     planned for each call's arguments (plan_cache_mode = force_custom_plan), so a
--           state filter becomes a constant the planner matches against the partial
--           indexes: queued jobs can be read from jobs_ready_idx, running ones through
--           jobs_running_lease_idx, dead and cancelled ones from jobs_dead_cancelled_idx,
--           sorting the few found (or, when the planner expects a page sooner that way, by
--           walking jobs_pkey backwards); done jobs and no state filter walk jobs_pkey
--           backwards. Under 200 ms for every state filter with 1,000,000 done jobs
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
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_list.max_jobs IS NULL OR jobs_list.max_jobs < 1 OR jobs_list.max_jobs > 1000 THEN
        PERFORM _jobs_invalid('jobs_list', 'max_jobs', 'must be between 1 and 1000');
    END IF;

    -- With custom plans every argument is a constant: "NULL IS NULL OR ..." folds away, and
    -- j.state = 'dead' proves the predicate of jobs_dead_cancelled_idx. The lease test is
    -- true exactly for running jobs (jobs_lease_valid); spelled out for state 'running', it
    -- lets jobs_running_lease_idx (WHERE lease_expires_at IS NOT NULL) serve.
    RETURN QUERY
    SELECT j.id, j.queue, j.kind, j.state, j.priority, j.attempts, j.max_attempts, j.run_at,
           j.created_at, j.started_at, j.finished_at, j.lease_holder, j.lease_expires_at,
           j.unique_key, j.concurrency_key, j.last_error
    FROM jobs j
    WHERE (jobs_list.state IS NULL OR j.state = jobs_list.state)
      AND (jobs_list.state IS DISTINCT FROM 'running' OR j.lease_expires_at IS NOT NULL)
      AND (jobs_list.queue IS NULL OR j.queue = jobs_list.queue)
      AND (jobs_list.kind IS NULL OR j.kind = jobs_list.kind)
      AND (jobs_list.before_id IS NULL OR j.id < jobs_list.before_id)
    ORDER BY j.id DESC
    LIMIT jobs_list.max_jobs;
END;
$$;

COMMENT ON FUNCTION jobs_list(jobs_state, text, text, integer, bigint) IS
    'skiplock: one page of jobs (no payload), newest first, filtered by state, queue and kind; keyset paging with before_id.';
