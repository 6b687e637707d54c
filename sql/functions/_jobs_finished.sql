-- _jobs_finished: what follows when jobs that others wait for finish: NOTIFY jobs_finished for
-- those enqueued with notify_finished, and their children's dependencies.
--
-- Promises: ids are jobs that have just become done, dead or cancelled in the caller's
--           transaction (the caller holds their rows). For each, in the same transaction:
--           - notify_finished: NOTIFY jobs_finished with the id (delivered at commit);
--           - each dependency on it is resolved when the job is done, or when it ended dead or
--             cancelled and the child was enqueued with on_parent_failure 'run'; the child's
--             pending_parents drops by one per resolved dependency, and a waiting child whose
--             count reaches 0 becomes queued (with its jobs_queued row, inserted here) and,
--             when its run_at has come, NOTIFYs jobs_ready;
--           - a waiting child whose dependency is not resolved by a dead or cancelled parent
--             (on_parent_failure 'cancel') is cancelled, last_error naming the parent and
--             cancelled_by = the parent, and the same applies to its own children, down the
--             whole graph (a loop, not recursion: no depth limit).
--           pending_parents stays exact whatever the child's state, so jobs_retry can put a
--           revived child back in the right state.
-- Locks:    the children's rows in id order before any changes (so two callers finishing
--           parents of the same children take turns instead of deadlocking), then their
--           jobs_dependencies rows; for a job that ended dead or cancelled, every descendant
--           the cancellation may reach, in one id order, before the first round. (Statements
--           that end several jobs at once, jobs_cancel_many and jobs_requeue_expired, handle
--           them one by one through jobs_finished_cascade: with children shared with a batch
--           of completions they can still deadlock with it, and the loser retries.) Two last parents finishing at once
--           in READ COMMITTED: the second waits for the first's child row, then sees its
--           decrement and releases the child. In REPEATABLE READ or SERIALIZABLE the second
--           gets 40001 (could not serialize): retry the transaction.
-- States:   children waiting -> queued, or waiting -> cancelled.
-- Time:     now() (transaction start).
CREATE OR REPLACE FUNCTION _jobs_finished(ids bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- Every statement finds its jobs by id (jobs_pkey) or its dependencies by jobs_dependencies'
-- indexes; a plan cached while the tables were small would scan them whole ever after.
SET enable_seqscan = off
-- With sequential scans off, a plan with a condition that no index serves is
-- costed at 1e10, far above jit_above_cost, so every call would JIT-compile its statements
-- (about 100 ms each time where JIT is available).
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_ids      bigint[] := _jobs_finished.ids;
    v_children bigint[];
    v_queues   text[];
    v_failed   boolean;
BEGIN
    -- The cancellations below fire jobs_finished_cascade for each cancelled child; this loop
    -- handles those children itself, so the trigger stands aside meanwhile.
    PERFORM set_config('skiplock.cascading', 'on', true);
    -- A cancellation goes down the graph round by round; each round would lock its children
    -- in id order, but not in one order with the later rounds. So every job it may reach (all
    -- descendants through unresolved dependencies) is locked first, in id order: the order
    -- any other caller locks a subset of them in.
    v_failed := EXISTS (SELECT FROM jobs j WHERE j.id = ANY (v_ids) AND j.state IN ('dead', 'cancelled'));
    IF v_failed THEN
        PERFORM 1
        FROM jobs c
        WHERE c.id = ANY (ARRAY(
                WITH RECURSIVE down(id) AS (
                    SELECT d.child_id FROM jobs_dependencies d
                    WHERE d.parent_id = ANY (v_ids) AND NOT d.resolved
                    UNION
                    SELECT d.child_id FROM down
                    JOIN jobs_dependencies d ON d.parent_id = down.id AND NOT d.resolved
                )
                SELECT down.id FROM down ORDER BY down.id))
        ORDER BY c.id
        FOR NO KEY UPDATE;
    END IF;
    WHILE cardinality(v_ids) > 0 LOOP
        PERFORM pg_notify('jobs_finished', j.id::text)
        FROM jobs j
        WHERE j.id = ANY (v_ids) AND j.notify_finished
        ORDER BY j.id;

        v_children := ARRAY(SELECT DISTINCT d.child_id FROM jobs_dependencies d
                            WHERE d.parent_id = ANY (v_ids) AND NOT d.resolved
                            ORDER BY d.child_id);
        EXIT WHEN cardinality(v_children) = 0;
        -- Lock the children first, in id order; the statements below see every transaction
        -- that held them as committed (a new snapshot each, in READ COMMITTED).
        PERFORM 1 FROM jobs c WHERE c.id = ANY (v_children) ORDER BY c.id FOR NO KEY UPDATE;

        WITH resolved AS (
            UPDATE jobs_dependencies d
            SET resolved = true
            FROM jobs p, jobs c
            WHERE d.parent_id = ANY (v_ids)
              AND NOT d.resolved
              AND p.id = d.parent_id
              AND c.id = d.child_id
              AND (p.state = 'done' OR c.on_parent_failure = 'run')
            RETURNING d.child_id
        ), counted AS (
            SELECT r.child_id, count(*)::integer AS n FROM resolved r GROUP BY r.child_id
        ), released AS (
            UPDATE jobs c
            SET pending_parents = c.pending_parents - n.n,
                state = CASE WHEN c.state = 'waiting' AND c.pending_parents - n.n = 0 THEN 'queued'
                             ELSE c.state END::jobs_state
            FROM counted n
            WHERE c.id = n.child_id
            RETURNING c.id, c.queue, c.priority, c.run_at, c.concurrency_key, c.state
        ), listed AS (
            -- The released jobs' jobs_queued rows, here in one statement (jobs_queued_sync
            -- leaves releases alone: a trigger call per job would cost more than the rest).
            INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
            SELECT r.queue, r.priority, r.run_at, r.id, r.concurrency_key
            FROM released r
            WHERE r.state = 'queued'
            RETURNING jobs_queued.queue, jobs_queued.run_at
        )
        SELECT ARRAY(SELECT DISTINCT l.queue FROM listed l WHERE l.run_at <= now())
        INTO v_queues;
        PERFORM pg_notify('jobs_ready', q) FROM unnest(v_queues) AS q;

        -- Children of a dead or cancelled parent that do not run without it (the only
        -- children a later round looks at: those are cancelled jobs).
        EXIT WHEN NOT v_failed;
        WITH cancelled AS (
            UPDATE jobs c
            SET state = 'cancelled',
                finished_at = now(),
                cancelled_by = p.id,
                last_error = format('parent %s ended %s', p.id, p.state),
                errors = _jobs_errors_append(c.errors, jsonb_build_object(
                    'attempt', c.attempts, 'at', now(),
                    'error', format('parent %s ended %s', p.id, p.state)))
            FROM jobs_dependencies d, jobs p
            WHERE d.parent_id = ANY (v_ids)
              AND NOT d.resolved
              AND p.id = d.parent_id
              AND p.state IN ('dead', 'cancelled')
              AND c.id = d.child_id
              AND c.state = 'waiting'
              AND c.on_parent_failure = 'cancel'
            RETURNING c.id, c.has_children, c.notify_finished
        )
        SELECT ARRAY(SELECT x.id FROM cancelled x WHERE x.has_children OR x.notify_finished ORDER BY x.id)
        INTO v_ids;
    END LOOP;
    PERFORM set_config('skiplock.cascading', '', true);
END;
$$;

COMMENT ON FUNCTION _jobs_finished(bigint[]) IS
    'skiplock (private): NOTIFYs jobs_finished and resolves the dependencies on jobs that just finished: releases or cancels their children.';
