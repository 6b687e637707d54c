-- _jobs_claim_take: the second half of every claim: leases the jobs whose jobs_queued rows
-- the caller picked.
--
-- Promises: deletes the given jobs_queued rows (rows: their ctids, which the caller's
--           transaction has locked FOR UPDATE, so they cannot have moved) and moves each
--           of their jobs that is still queued to running with attempts + 1 (the fencing token
--           returned as attempt), lease_holder = worker, lease_role = session_user,
--           lease_expires_at = now() + lease and started_at = now(), then records the lease:
--           one jobs_claims row per queue among them (jobs.claim_id names it), listing the
--           jobs. A job whose attempts are already at 2147483647 (no fencing token left) goes
--           dead instead, with the reason in last_error and errors, and is not returned. A row
--           whose job is no longer queued is only deleted. Returns the leased jobs in claim
--           order (priority, run_at, id), each with its parents' results (parent_results, see
--           _jobs_parent_results; NULL without parents) and its saved checkpoints.
-- Locks:    the jobs rows (the update), after the jobs_queued rows: the lock order every
--           function follows, so no two sessions wait on each other in opposite orders.
-- States:   queued -> running (or dead at the attempts limit).
-- Time:     now() (transaction start).
CREATE OR REPLACE FUNCTION _jobs_claim_take(
    worker      text,
    lease       interval,
    rows        tid[]
)
RETURNS SETOF jobs_claimed
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- One plan for claims of every size (as jobs_complete_many): otherwise its statement is planned
-- anew at many calls, 0.4 ms each. Rows are found by ctid and jobs by jobs_pkey, whatever the
-- arrays hold.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    -- The login claiming, recorded as each job's lease_role (see jobs_claim).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF cardinality(_jobs_claim_take.rows) = 0 THEN
        RETURN;
    END IF;
    -- One statement: each is a round of planning and executor start-up, and a claim of one
    -- job for an idle worker (its start latency) is mostly that.
    RETURN QUERY
    WITH taken AS (
        -- A TID scan: the rows' places are known.
        DELETE FROM jobs_queued q
        WHERE q.ctid = ANY (_jobs_claim_take.rows)
        RETURNING q.id, q.queue
    ), claims AS (
        -- One claim id per queue: a limited queue counts its running jobs by its own rows.
        SELECT t.queue, nextval('jobs_claims_claim_id_seq') AS claim_id
        FROM (SELECT DISTINCT taken.queue FROM taken) AS t
    ), claimed AS (
        UPDATE jobs j
        -- A job whose attempts are at the integer limit has no attempt number (fencing token)
        -- left: it goes dead here, with the reason in last_error, instead of raising 22003
        -- for the whole batch. Only a forever-snoozed job gets there (jobs_snooze).
        SET state = CASE WHEN j.attempts < 2147483647 THEN 'running' ELSE 'dead' END::jobs_state,
            attempts = CASE WHEN j.attempts < 2147483647 THEN j.attempts + 1 ELSE j.attempts END,
            lease_holder = CASE WHEN j.attempts < 2147483647 THEN _jobs_claim_take.worker ELSE j.lease_holder END,
            lease_role = CASE WHEN j.attempts < 2147483647 THEN v_login END,
            lease_expires_at = CASE WHEN j.attempts < 2147483647 THEN now() + _jobs_claim_take.lease END,
            started_at = CASE WHEN j.attempts < 2147483647 THEN now() ELSE j.started_at END,
            finished_at = CASE WHEN j.attempts < 2147483647 THEN j.finished_at ELSE now() END,
            last_error = CASE WHEN j.attempts < 2147483647 THEN j.last_error ELSE 'no attempt left: attempts is at its limit, 2147483647' END,
            errors = CASE WHEN j.attempts < 2147483647 THEN j.errors
                          ELSE _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                                'error', 'no attempt left: attempts is at its limit, 2147483647',
                                                                                'worker', _jobs_claim_take.worker)) END,
            claim_id = CASE WHEN j.attempts < 2147483647 THEN c.claim_id ELSE j.claim_id END
        FROM claims c
        -- = ANY(ARRAY(...)) finds the rows through jobs_pkey, in id order.
        WHERE j.id = ANY (ARRAY(SELECT taken.id FROM taken ORDER BY taken.id))
          AND c.queue = j.queue
          AND j.state = 'queued'
        RETURNING j.id, j.queue, j.kind, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
                  j.lease_expires_at, j.created_at, j.meta, j.state, j.claim_id, j.depends_on, j.checkpoints,
                  j.workflow_id
    ), recorded AS (
        INSERT INTO jobs_claims (claim_id, queue, expires_at, running, ids)
        SELECT c.claim_id, c.queue, now() + _jobs_claim_take.lease, count(*), array_agg(c.id ORDER BY c.id)
        FROM claimed c
        WHERE c.state = 'running'
        GROUP BY c.claim_id, c.queue
    )
    SELECT c.id, c.queue, c.kind, c.payload, c.attempts, c.max_attempts, c.priority, c.run_at,
           c.lease_expires_at, c.created_at, c.meta,
           -- Only a job with parents looks anything up. Results that take less than 512 kB as
           -- stored cannot overflow jsonb (see _jobs_parent_results, which handles the rest):
           -- the usual case, built here without a function call per job.
           CASE WHEN c.depends_on IS NULL THEN NULL
                WHEN (SELECT coalesce(sum(pg_column_size(p.result)), 0) FROM jobs p WHERE p.id = ANY (c.depends_on)) < 524288
                THEN (SELECT jsonb_object_agg(CASE WHEN p.workflow_id = c.workflow_id THEN p.workflow_step
                                                   ELSE p.id::text END, p.result)
                      FROM jobs p WHERE p.id = ANY (c.depends_on))
                ELSE _jobs_parent_results(c.workflow_id, c.depends_on)
           END,
           c.checkpoints
    FROM claimed c WHERE c.state = 'running' ORDER BY c.priority, c.run_at, c.id;
END;
$$;

COMMENT ON FUNCTION _jobs_claim_take(text, interval, tid[]) IS
    'skiplock (private): deletes the picked jobs_queued rows and leases their jobs, recording the claim in jobs_claims.';
