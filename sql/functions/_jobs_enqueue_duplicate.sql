-- _jobs_enqueue_duplicate: what an enqueue with a unique_key does when the key's row exists
-- (jobs_enqueue, jobs_enqueue_many).
--
-- Promises: returns id = new_id when the caller is to insert its job under new_id: the key
--           row now names new_id (taken over from a finished job whose unique_for period is
--           over, or moved from a running job by a replace, or inserted after the holder
--           finished meanwhile); then not_before is the time the caller's run_at must not be
--           earlier than (the end of the period it took over; NULL otherwise), so that no
--           claim whose clock is behind the caller's starts the job inside the period.
--           Otherwise returns the id of the job that stands for the enqueue:
--             - a finished job whose unique_for period is not over (with 'keep' and with
--               'replace': a finished job is never changed);
--             - with 'keep', the live job holding the key, unchanged;
--             - with 'replace', a waiting or queued holder, whose payload, run_at, priority
--               and max_attempts become the given ones (its jobs_queued row moves with them;
--               its kind, concurrency_key, meta, unique_for and parents stay), and a NOTIFY
--               jobs_ready when notify and it is queued and ready now;
--             - with 'replace', a running holder enqueued with unique_for, unchanged (its
--               period starts at its end: a job after it would start inside it).
--           A running holder without unique_for gets superseded_by = new_id and loses the key
--           to new_id (see _jobs_unique_key_superseded for what happens if it comes back).
-- Locks:    for a replace: the holder's jobs_queued row(s) FOR UPDATE (waiting for a claim
--           that picked it: the claim then wins and the holder is running), then the
--           holder's jobs row FOR NO KEY UPDATE (for a holder that was running or waiting,
--           in a subtransaction, given back if the holder turned queued meanwhile, so that
--           no jobs_queued row is left behind with the old values), then (moving it) the key row: the order
--           claims (jobs_queued, then jobs) and finishing jobs (jobs, then the key row
--           through _jobs_unique_key_sync) follow, so none waits on another in the opposite
--           order. 'keep' locks nothing; an insert or a takeover waits for a concurrent
--           transaction inserting or changing the same key row.
-- States:   none (the holder's fields change, not its state).
-- Errors:   22023 from caller naming kind_parameter when a replace meets a live holder of
--           another kind (nothing is changed: the caller's transaction ends in the error).
-- Time:     now() (transaction start) decides whether a period is over.
CREATE OR REPLACE FUNCTION _jobs_enqueue_duplicate(
    queue        text,
    unique_key   text,
    on_duplicate text,
    new_id       bigint,
    payload      jsonb,
    run_at       timestamptz,
    priority     integer,
    max_attempts integer,
    notify       boolean,
    kind         text,
    caller       text,
    kind_parameter text,
    OUT id         bigint,
    OUT not_before timestamptz
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_holder bigint;
    v_held   timestamptz;
    v_state  jobs_state;
    v_queue  text;
    v_prio   integer;
    v_run_at timestamptz;
    v_for    interval;
    v_kind   text;
BEGIN
    LOOP
        SELECT k.id, k.held_until INTO v_holder, v_held
        FROM jobs_unique_keys k
        WHERE k.queue = _jobs_enqueue_duplicate.queue AND k.unique_key = _jobs_enqueue_duplicate.unique_key;
        IF NOT FOUND THEN
            -- The holder finished meanwhile: the key is free (or a concurrent insert, which
            -- this waits for, takes it first).
            INSERT INTO jobs_unique_keys (queue, unique_key, id)
            VALUES (_jobs_enqueue_duplicate.queue, _jobs_enqueue_duplicate.unique_key, _jobs_enqueue_duplicate.new_id)
            ON CONFLICT (queue, unique_key) DO NOTHING;
            IF FOUND THEN
                id := _jobs_enqueue_duplicate.new_id;
                RETURN;
            END IF;
            CONTINUE;
        END IF;

        IF v_held IS NOT NULL THEN
            -- A finished job's unique_for period.
            IF v_held > now() THEN
                id := v_holder;
                RETURN;
            END IF;
            UPDATE jobs_unique_keys k
            SET id = _jobs_enqueue_duplicate.new_id, held_until = NULL
            WHERE k.queue = _jobs_enqueue_duplicate.queue AND k.unique_key = _jobs_enqueue_duplicate.unique_key
              AND k.id = v_holder AND k.held_until = v_held;
            IF FOUND THEN
                id := _jobs_enqueue_duplicate.new_id;
                not_before := v_held;
                RETURN;
            END IF;
            CONTINUE;
        END IF;

        IF _jobs_enqueue_duplicate.on_duplicate = 'keep' THEN
            id := v_holder;
            RETURN;
        END IF;

        -- 'replace'. A queued holder's jobs_queued row first, as a claim takes it: a claim
        -- that picked it first finishes (the row is gone, the holder running) before this
        -- goes on, and no claim picks it while this holds it.
        SELECT j.state, j.queue, j.priority, j.run_at INTO v_state, v_queue, v_prio, v_run_at
        FROM jobs j WHERE j.id = v_holder;
        IF v_state = 'queued' THEN
            PERFORM FROM jobs_queued q
            WHERE (q.queue, q.priority, q.run_at, q.id) = (v_queue, v_prio, v_run_at, v_holder)
            FOR UPDATE;
            CONTINUE WHEN NOT FOUND; -- claimed or changed meanwhile: look again
        END IF;
        IF v_state = 'queued' THEN
            -- Holding its jobs_queued row, the job can leave queued (a cancel) but not change
            -- while queued: every such change takes that row first.
            SELECT j.state, j.unique_for, j.kind INTO v_state, v_for, v_kind
            FROM jobs j WHERE j.id = v_holder
            FOR NO KEY UPDATE;
        ELSE
            -- Running or waiting when read: it may be queued by the time its row is ours
            -- (a failed attempt's retry, its last parent done), with a jobs_queued row this
            -- does not hold and, holding the job's row, must not wait for (a claim waits in
            -- the other order). Then the lock goes with the subtransaction and the loop
            -- starts over, taking the jobs_queued row first.
            BEGIN
                SELECT j.state, j.unique_for, j.kind INTO v_state, v_for, v_kind
                FROM jobs j WHERE j.id = v_holder
                FOR NO KEY UPDATE;
                IF v_state = 'queued' THEN
                    RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state';
                END IF;
            EXCEPTION WHEN object_not_in_prerequisite_state THEN
                CONTINUE;
            END;
        END IF;
        -- With the holder's row held, its key cannot move or go: is it still the holder?
        CONTINUE WHEN NOT EXISTS (SELECT FROM jobs_unique_keys k
                                  WHERE k.queue = _jobs_enqueue_duplicate.queue
                                    AND k.unique_key = _jobs_enqueue_duplicate.unique_key
                                    AND k.id = v_holder AND k.held_until IS NULL);
        IF v_state IN ('waiting', 'queued', 'running') AND v_kind <> _jobs_enqueue_duplicate.kind THEN
            -- A replace is the same job again: another kind's handler would get this payload
            -- (in place), or the key would pass to a job of another kind.
            PERFORM _jobs_invalid(_jobs_enqueue_duplicate.caller, _jobs_enqueue_duplicate.kind_parameter,
                format('must be %L, the kind of job %s, which holds unique_key %L, to replace it (on_duplicate ''replace'')',
                       v_kind, v_holder, _jobs_enqueue_duplicate.unique_key));
        END IF;
        IF v_state IN ('waiting', 'queued') THEN
            -- In place; a changed run_at or priority moves the jobs_queued row (trigger
            -- jobs_queued_sync), the one held here.
            UPDATE jobs j
            SET payload = _jobs_enqueue_duplicate.payload,
                run_at = _jobs_enqueue_duplicate.run_at,
                priority = _jobs_enqueue_duplicate.priority,
                max_attempts = _jobs_enqueue_duplicate.max_attempts
            WHERE j.id = v_holder;
            IF v_state = 'queued' AND _jobs_enqueue_duplicate.notify AND _jobs_enqueue_duplicate.run_at <= now() THEN
                PERFORM pg_notify('jobs_ready', _jobs_enqueue_duplicate.queue);
            END IF;
            id := v_holder;
            RETURN;
        ELSIF v_state = 'running' THEN
            IF v_for IS NOT NULL THEN
                id := v_holder;
                RETURN;
            END IF;
            UPDATE jobs_unique_keys k
            SET id = _jobs_enqueue_duplicate.new_id
            WHERE k.queue = _jobs_enqueue_duplicate.queue AND k.unique_key = _jobs_enqueue_duplicate.unique_key
              AND k.id = v_holder;
            UPDATE jobs j SET superseded_by = _jobs_enqueue_duplicate.new_id WHERE j.id = v_holder;
            id := _jobs_enqueue_duplicate.new_id;
            RETURN;
        END IF;
        -- Finished in this very transaction before its key row went (a trigger's order):
        -- nothing to replace.
        id := v_holder;
        RETURN;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION _jobs_enqueue_duplicate(text, text, text, bigint, jsonb, timestamptz, integer, integer, boolean, text, text, text) IS
    'skiplock (private): an enqueue meeting its unique_key taken: keep, replace in place, supersede a running job, or take over an ended period.';
