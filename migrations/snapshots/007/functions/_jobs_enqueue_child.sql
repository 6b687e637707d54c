-- _jobs_enqueue_child: the insert of jobs_enqueue and jobs_enqueue_workflow for a job with
-- parents.
--
-- Promises: parents (sorted, distinct, not empty) must all exist, else 22023 naming
--           depends_on and nothing is inserted (the caller's statement fails). The job gets id
--           (or the next jobs_id_seq value), one jobs_dependencies row per parent, and
--           pending_parents = the parents that are neither done nor (with on_parent_failure
--           'run') dead or cancelled; every parent's row is updated (has_children), so that
--           a REPEATABLE READ transaction finishing it concurrently gets 40001. The job starts
--           cancelled when a parent is dead or cancelled and on_parent_failure is 'cancel'
--           (last_error and cancelled_by name the lowest such parent; its unique_key row is
--           given back, or held for unique_for), waiting while pending_parents > 0, queued otherwise (with its
--           jobs_queued row and, when notify and run_at has come, a NOTIFY jobs_ready).
-- Locks:    the parents' rows FOR NO KEY UPDATE in id order, until the caller's transaction
--           ends: a parent finishing concurrently either committed before (its new state is
--           seen) or waits for this transaction (and then finds the child in
--           jobs_dependencies). REPEATABLE READ: a parent changed since the snapshot gives
--           40001.
-- States:   new job in waiting, queued or cancelled.
-- Time:     now() (transaction start).
CREATE OR REPLACE FUNCTION _jobs_enqueue_child(
    kind              text,
    payload           jsonb,
    queue             text,
    run_at            timestamptz,
    priority          integer,
    max_attempts      integer,
    unique_key        text,
    concurrency_key   text,
    meta              jsonb,
    notify            boolean,
    parents           bigint[],
    on_parent_failure text,
    notify_finished   boolean,
    id                bigint,
    workflow_id       bigint,
    workflow_step     text,
    unique_for        interval DEFAULT NULL
)
RETURNS bigint
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
    v_id       bigint := coalesce(_jobs_enqueue_child.id, nextval('jobs_id_seq'));
    v_run      boolean := _jobs_enqueue_child.on_parent_failure = 'run';
    v_known    bigint[];
    v_states   jobs_state[];
    v_pending  integer;
    v_failed   integer;
    v_state    jobs_state;
    v_error    text;
BEGIN
    -- The parents' rows, locked in id order (the order every caller locks jobs in).
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.state ORDER BY l.id), '{}')
    INTO v_known, v_states
    FROM (SELECT p.id, p.state FROM jobs p
          WHERE p.id = ANY (_jobs_enqueue_child.parents)
          ORDER BY p.id
          FOR NO KEY UPDATE) AS l;
    IF cardinality(v_known) <> cardinality(_jobs_enqueue_child.parents) THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'depends_on',
            format('names no job with id %s (on this database: a job and its parents live on one shard)',
                   (SELECT u FROM unnest(_jobs_enqueue_child.parents) AS u WHERE u <> ALL (v_known) ORDER BY u LIMIT 1)));
    END IF;

    SELECT count(*) FILTER (WHERE s <> 'done' AND NOT (s IN ('dead', 'cancelled') AND v_run)),
           min(o) FILTER (WHERE s IN ('dead', 'cancelled') AND NOT v_run)
    INTO v_pending, v_failed
    FROM unnest(v_states) WITH ORDINALITY AS x(s, o);

    IF v_failed IS NOT NULL THEN
        v_state := 'cancelled';
        v_error := format('parent %s ended %s', v_known[v_failed], v_states[v_failed]);
    ELSIF v_pending > 0 THEN
        v_state := 'waiting';
    ELSE
        v_state := 'queued';
    END IF;

    INSERT INTO jobs (id, queue, kind, payload, state, run_at, priority, max_attempts, unique_key, concurrency_key,
                      meta, notify_finished, workflow_id, workflow_step, depends_on, pending_parents,
                      on_parent_failure, finished_at, cancelled_by, last_error, errors, unique_for)
    VALUES (v_id, _jobs_enqueue_child.queue, _jobs_enqueue_child.kind, _jobs_enqueue_child.payload, v_state,
            _jobs_enqueue_child.run_at, _jobs_enqueue_child.priority, _jobs_enqueue_child.max_attempts,
            _jobs_enqueue_child.unique_key, _jobs_enqueue_child.concurrency_key, _jobs_enqueue_child.meta,
            nullif(_jobs_enqueue_child.notify_finished, false), _jobs_enqueue_child.workflow_id,
            _jobs_enqueue_child.workflow_step, v_known, v_pending, _jobs_enqueue_child.on_parent_failure,
            CASE WHEN v_state = 'cancelled' THEN now() END,
            CASE WHEN v_state = 'cancelled' THEN v_known[v_failed] END,
            v_error,
            CASE WHEN v_state = 'cancelled'
                 THEN jsonb_build_array(jsonb_build_object('attempt', 0, 'at', now(), 'error', v_error))
                 ELSE '[]' END,
            _jobs_enqueue_child.unique_for);

    INSERT INTO jobs_dependencies (parent_id, child_id, resolved)
    SELECT p, v_id, s = 'done' OR (s IN ('dead', 'cancelled') AND v_run)
    FROM unnest(v_known, v_states) AS x(p, s);
    -- Every parent's row gets a new version, even when has_children is already set: a
    -- REPEATABLE READ transaction finishing the parent with a snapshot from before this
    -- commit then fails with 40001 instead of missing the child (it would read
    -- jobs_dependencies as of its snapshot and leave the child waiting forever).
    UPDATE jobs p SET has_children = true
    WHERE p.id = ANY (v_known);

    IF v_state = 'queued' THEN
        INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
        VALUES (_jobs_enqueue_child.queue, _jobs_enqueue_child.priority, _jobs_enqueue_child.run_at, v_id,
                _jobs_enqueue_child.concurrency_key);
        IF _jobs_enqueue_child.notify AND _jobs_enqueue_child.run_at <= now() THEN
            PERFORM pg_notify('jobs_ready', _jobs_enqueue_child.queue);
        END IF;
    ELSIF v_state = 'cancelled' THEN
        -- Born finished: the key is free again (or, with unique_for, taken for that long, as
        -- _jobs_unique_key_sync does for a job that ends), and waiters hear of it now.
        IF _jobs_enqueue_child.unique_for IS NULL THEN
            DELETE FROM jobs_unique_keys k
            WHERE k.queue = _jobs_enqueue_child.queue AND k.unique_key = _jobs_enqueue_child.unique_key AND k.id = v_id;
        ELSE
            UPDATE jobs_unique_keys k
            SET held_until = now() + _jobs_enqueue_child.unique_for
            WHERE k.queue = _jobs_enqueue_child.queue AND k.unique_key = _jobs_enqueue_child.unique_key AND k.id = v_id;
        END IF;
        IF _jobs_enqueue_child.notify_finished THEN
            PERFORM pg_notify('jobs_finished', v_id::text);
        END IF;
    END IF;
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION _jobs_enqueue_child(text, jsonb, text, timestamptz, integer, integer, text, text, jsonb, boolean,
                                        bigint[], text, boolean, bigint, bigint, text, interval) IS
    'skiplock (private): inserts a job with parents (waiting, queued or cancelled by their states) and its dependencies.';
