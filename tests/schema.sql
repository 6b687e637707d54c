-- A fresh install of skiplock (every migration) into schema skiplock: pg_dump --schema-only
-- --no-owner --schema=skiplock, without pg_dump's comments and SET lines. Generated: TestSchemaDump
-- fails when it is stale. Regenerate it with
--
--     go test -run TestSchemaDump . -update

CREATE SCHEMA skiplock;

CREATE TYPE skiplock.jobs_claimed AS (
	id bigint,
	queue text,
	kind text,
	payload jsonb,
	attempt integer,
	max_attempts integer,
	priority integer,
	run_at timestamp with time zone,
	lease_expires_at timestamp with time zone,
	created_at timestamp with time zone,
	meta jsonb,
	parent_results jsonb,
	checkpoints jsonb
);

CREATE TYPE skiplock.jobs_state AS ENUM (
    'waiting',
    'queued',
    'running',
    'done',
    'dead',
    'cancelled'
);

CREATE TYPE skiplock.jobs_listed AS (
	id bigint,
	queue text,
	kind text,
	state skiplock.jobs_state,
	priority integer,
	attempts integer,
	max_attempts integer,
	run_at timestamp with time zone,
	created_at timestamp with time zone,
	started_at timestamp with time zone,
	finished_at timestamp with time zone,
	lease_holder text,
	lease_expires_at timestamp with time zone,
	unique_key text,
	concurrency_key text,
	last_error text,
	progress jsonb,
	workflow_id bigint
);

CREATE TYPE skiplock.jobs_maintenance AS (
	ran boolean,
	requeued integer,
	pruned_done integer,
	pruned_cancelled integer,
	pruned_dead integer,
	more boolean
);

CREATE TYPE skiplock.jobs_queue_metrics AS (
	queue text,
	ready bigint,
	scheduled bigint,
	running bigint,
	running_expired bigint,
	dead bigint,
	cancelled bigint,
	done_estimate bigint,
	oldest_ready_age_s double precision,
	jobs_created_total bigint,
	paused boolean,
	max_running integer,
	per_key integer,
	max_starts integer,
	per interval,
	waiting bigint,
	fair boolean,
	ordered boolean,
	rate_per_key boolean
);

CREATE TYPE skiplock.jobs_queue_stats AS (
	queue text,
	state skiplock.jobs_state,
	jobs bigint,
	oldest_ready_age interval
);

CREATE FUNCTION skiplock._jobs_check_bulk_args(func text, states skiplock.jobs_state[], allowed skiplock.jobs_state[], max_jobs integer) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF _jobs_check_bulk_args.states IS NULL THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states', 'must not be NULL');
    END IF;
    IF cardinality(_jobs_check_bulk_args.states) = 0 THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states', 'must not be empty');
    END IF;
    IF array_position(_jobs_check_bulk_args.states, NULL) IS NOT NULL THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states', 'must not contain NULL');
    END IF;
    IF NOT _jobs_check_bulk_args.states <@ _jobs_check_bulk_args.allowed THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states',
                              'may only hold ' || array_to_string(_jobs_check_bulk_args.allowed, ', '));
    END IF;
    IF _jobs_check_bulk_args.max_jobs IS NULL OR _jobs_check_bulk_args.max_jobs < 1 THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'max_jobs', 'must be at least 1');
    END IF;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_check_bulk_args(func text, states skiplock.jobs_state[], allowed skiplock.jobs_state[], max_jobs integer) IS 'skiplock (private): raises 22023 for bad states or max_jobs of a bulk action.';

CREATE FUNCTION skiplock._jobs_check_fence_arrays(func text, ids bigint[], attempts integer[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF _jobs_check_fence_arrays.ids IS NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must not be NULL');
    END IF;
    IF _jobs_check_fence_arrays.attempts IS NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must not be NULL');
    END IF;
    IF array_ndims(_jobs_check_fence_arrays.ids) > 1 THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must be a one-dimensional array');
    END IF;
    IF array_ndims(_jobs_check_fence_arrays.attempts) > 1 THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must be a one-dimensional array');
    END IF;
    IF cardinality(_jobs_check_fence_arrays.ids) <> cardinality(_jobs_check_fence_arrays.attempts) THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must have as many elements as ids');
    END IF;
    IF cardinality(_jobs_check_fence_arrays.ids) > 100000 THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must have at most 100000 elements');
    END IF;
    IF array_position(_jobs_check_fence_arrays.ids, NULL) IS NOT NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must not contain NULL');
    END IF;
    IF array_position(_jobs_check_fence_arrays.attempts, NULL) IS NOT NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must not contain NULL');
    END IF;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_check_fence_arrays(func text, ids bigint[], attempts integer[]) IS 'skiplock (private): validates the ids/attempts arrays of the batch functions.';

CREATE FUNCTION skiplock._jobs_claim_limited(worker text, max_jobs integer, queues text[], lease interval, skip_locked_queues boolean DEFAULT false, freed_queues text[] DEFAULT '{}'::text[], freed_slots integer[] DEFAULT '{}'::integer[]) RETURNS SETOF skiplock.jobs_claimed
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'auto'
    AS $$
#variable_conflict use_column
DECLARE
    v_settings    refcursor;
    v_q           record;
    v_budget      integer;
    v_at          timestamptz;
    v_limited     text[]        := '{}';
    v_rate_queues text[]        := '{}';
    -- Candidates of the limited queues, each queue within its budget: their jobs_queued rows.
    v_rows        tid[]         := '{}';
    v_ids         bigint[]      := '{}';
    v_pris        integer[]     := '{}';
    v_run_ats     timestamptz[] := '{}';
    -- Candidates of one queue of the key walk.
    v_krows       tid[];
    v_kids        bigint[];
    v_kpris       integer[];
    v_kruns       timestamptz[];
    -- The queue's running jobs per concurrency_key (per_key and ordered queues).
    v_run_keys    text[];
    v_run_ns      integer[];
    v_urows       tid[];
    v_uids        bigint[];
    v_upris       integer[];
    v_uruns       timestamptz[];
    -- Fair queues: the walk's state.
    v_k           record;
    v_room        integer;
    v_taken       integer;
    v_got         integer;
    v_round_keys  integer;
    v_share       integer;
    v_tkeys       text[];
    v_tns         integer[];
    v_pos         integer;
    v_last        text;
    v_moved       boolean;
    v_n           bigint;
    v_blocked     text[];
    v_none_unkeyed boolean;
    -- Fair queues: keys passed without a job in this claim (bounded), and where the look for
    -- jobs without a key goes on past the queue's best ready jobs (rr_unkeyed_*).
    v_idle        integer;
    v_stopped     boolean;
    v_up          integer;
    v_ur          timestamptz;
    v_ui          bigint;
    v_found       tid[];
    -- A fair claim stops after this many keys that gave it nothing.
    c_idle_keys   CONSTANT integer := 1000;
BEGIN
    -- The same query twice, because a locking clause cannot be a parameter.
    IF _jobs_claim_limited.skip_locked_queues THEN
        OPEN v_settings FOR
            SELECT q.queue, q.max_running, q.per_key, q.max_starts, q.per, q.fair, q.ordered,
                   q.rate_per_key, q.rr_cursor, q.rr_unkeyed_priority, q.rr_unkeyed_run_at, q.rr_unkeyed_id
            FROM jobs_queues q
            WHERE (_jobs_claim_limited.queues IS NULL OR q.queue = ANY (_jobs_claim_limited.queues))
              AND NOT q.paused
              AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                   OR q.fair OR q.ordered)
            ORDER BY q.queue
            FOR UPDATE SKIP LOCKED;
    ELSE
        OPEN v_settings FOR
            SELECT q.queue, q.max_running, q.per_key, q.max_starts, q.per, q.fair, q.ordered,
                   q.rate_per_key, q.rr_cursor, q.rr_unkeyed_priority, q.rr_unkeyed_run_at, q.rr_unkeyed_id
            FROM jobs_queues q
            WHERE (_jobs_claim_limited.queues IS NULL OR q.queue = ANY (_jobs_claim_limited.queues))
              AND NOT q.paused
              AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                   OR q.fair OR q.ordered)
            ORDER BY q.queue
            FOR UPDATE;
    END IF;
    LOOP
        FETCH v_settings INTO v_q;
        EXIT WHEN NOT FOUND;
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION USING
                ERRCODE = 'feature_not_supported',
                MESSAGE = format('jobs_claim: queue %s has a concurrency or rate limit, which needs a READ COMMITTED transaction (this one is %s)',
                                 v_q.queue, current_setting('transaction_isolation')),
                HINT    = 'Call jobs_claim in autocommit or a READ COMMITTED transaction.';
        END IF;
        v_limited := v_limited || v_q.queue;

        -- Each statement from here takes a new snapshot, after the row lock was granted.
        v_budget := _jobs_claim_limited.max_jobs;
        IF v_q.max_running IS NOT NULL THEN
            v_budget := least(v_budget, v_q.max_running - (
                SELECT coalesce(sum(c.running), 0)::integer FROM jobs_claims c WHERE c.queue = v_q.queue));
        END IF;
        IF v_q.max_starts IS NOT NULL THEN
            -- Starts are logged at now(), which is not monotonic across claims (a claim's
            -- transaction may have begun before the previous claim's). Any window of length
            -- per that contains now() lies within (now() - per, now() + per), so counting
            -- every start after now() - per, later ones included, bounds every such window.
            -- The log is trimmed by its latest start, never by now(), and a claim whose now()
            -- is a whole window behind the latest start takes nothing: the starts it would
            -- have to count are then never trimmed before it looks. With rate_per_key the
            -- same holds of each key's starts (the log is the queue's, trimmed by the
            -- queue's latest start, which is no earlier than any key's): counted in the key
            -- walk below.
            SELECT max(s.started_at) INTO v_at FROM jobs_queue_starts s WHERE s.queue = v_q.queue;
            IF now() <= v_at - v_q.per THEN
                v_budget := 0;
            ELSE
                DELETE FROM jobs_queue_starts s WHERE s.queue = v_q.queue AND s.started_at <= v_at - 2 * v_q.per;
                IF NOT v_q.rate_per_key THEN
                    v_budget := least(v_budget, v_q.max_starts - (
                        SELECT count(*)::integer FROM jobs_queue_starts s
                        WHERE s.queue = v_q.queue AND s.started_at > now() - v_q.per));
                END IF;
            END IF;
            v_rate_queues := v_rate_queues || v_q.queue;
        END IF;
        CONTINUE WHEN v_budget <= 0;

        IF v_q.per_key IS NULL AND NOT v_q.fair AND NOT v_q.ordered AND NOT v_q.rate_per_key THEN
            -- max_running and a queue-wide rate only: the best v_budget ready jobs.
            SELECT v_rows || coalesce(array_agg(c.row), '{}'),
                   v_ids || coalesce(array_agg(c.id), '{}'),
                   v_pris || coalesce(array_agg(c.priority), '{}'),
                   v_run_ats || coalesce(array_agg(c.run_at), '{}')
            INTO v_rows, v_ids, v_pris, v_run_ats
            FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                  FROM jobs_queued q
                  WHERE q.queue = v_q.queue
                    AND q.run_at <= now()
                  ORDER BY q.priority, q.run_at, q.id
                  LIMIT v_budget
                  FOR UPDATE SKIP LOCKED) c;
            CONTINUE;
        END IF;

        -- The key walk (per_key, fair, ordered, rate_per_key, any combination). Each key's
        -- room: how many of its jobs this claim may start, the least of
        --   per_key minus its running jobs (keyed jobs only),
        --   1 if ordered and none of its jobs runs, else 0 (keyed jobs only),
        --   with rate_per_key, max_starts minus its starts in the window (jobs without a key
        --   are one group),
        -- and the queue's budget. Running jobs per key: the queue's jobs listed by its
        -- claims and still running under them, counted once per claim.
        v_run_keys := '{}';
        v_run_ns := '{}';
        IF v_q.per_key IS NOT NULL OR v_q.ordered THEN
            SELECT coalesce(array_agg(r.key), '{}'), coalesce(array_agg(r.n), '{}')
            INTO v_run_keys, v_run_ns
            FROM (SELECT j.concurrency_key AS key, count(*)::integer AS n
                  FROM jobs_claims c
                  CROSS JOIN LATERAL unnest(c.ids) AS u(id)
                  -- One primary-key probe per listed job, whatever the statistics (OFFSET 0
                  -- keeps the planner from joining the tables another way).
                  CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = u.id OFFSET 0) j
                  WHERE c.queue = v_q.queue
                    AND j.claim_id = c.claim_id
                    AND j.state = 'running'
                    AND j.concurrency_key IS NOT NULL
                  GROUP BY j.concurrency_key) r;
        END IF;

        IF v_q.fair THEN
            -- Round-robin: the keys of the queue's queued jobs in key order, starting after
            -- the key the previous claim took last (rr_cursor), then the group of jobs
            -- without a key, then the keys up to the cursor: one job of each key with room
            -- per turn. A key probed costs one step of a skip scan and one probe of its jobs;
            -- the walk stops once the budget is taken. When a whole turn leaves budget over,
            -- the next turn takes the rest in equal shares of the keys that gave a job.
            v_taken := 0;
            v_tkeys := '{}';
            v_tns := '{}';
            v_share := 1;
            v_moved := false;
            v_none_unkeyed := false;
            v_idle := 0;
            v_stopped := false;
            v_up := v_q.rr_unkeyed_priority;
            v_ur := v_q.rr_unkeyed_run_at;
            v_ui := v_q.rr_unkeyed_id;
            v_krows := '{}';
            v_kids := '{}';
            v_kpris := '{}';
            v_kruns := '{}';
            LOOP
                v_round_keys := 0;
                FOR v_k IN
                    WITH RECURSIVE after_cursor AS (
                        (SELECT q.concurrency_key AS key
                         FROM jobs_queued q
                         -- Keys are never '' (jobs_enqueue refuses it): '' is before them all.
                         WHERE q.queue = v_q.queue AND q.concurrency_key > coalesce(v_q.rr_cursor, '')
                         ORDER BY q.concurrency_key
                         LIMIT 1)
                        UNION ALL
                        SELECT (SELECT q.concurrency_key
                                FROM jobs_queued q
                                WHERE q.queue = v_q.queue AND q.concurrency_key > a.key
                                ORDER BY q.concurrency_key
                                LIMIT 1)
                        FROM after_cursor a
                        WHERE a.key IS NOT NULL
                    ), up_to_cursor AS (
                        (SELECT q.concurrency_key AS key
                         FROM jobs_queued q
                         WHERE q.queue = v_q.queue AND q.concurrency_key > ''
                           AND v_q.rr_cursor IS NOT NULL
                         ORDER BY q.concurrency_key
                         LIMIT 1)
                        UNION ALL
                        SELECT (SELECT q.concurrency_key
                                FROM jobs_queued q
                                WHERE q.queue = v_q.queue AND q.concurrency_key > b.key
                                ORDER BY q.concurrency_key
                                LIMIT 1)
                        FROM up_to_cursor b
                        WHERE b.key < v_q.rr_cursor
                    )
                    SELECT a.key FROM after_cursor a WHERE a.key IS NOT NULL
                    UNION ALL
                    SELECT NULL::text
                    UNION ALL
                    SELECT b.key FROM up_to_cursor b WHERE b.key <= v_q.rr_cursor
                LOOP
                    -- The key's room (see above), less what this claim took of it already.
                    v_pos := array_position(v_tkeys, v_k.key);
                    v_room := least(
                        CASE WHEN v_k.key IS NOT NULL THEN
                            v_q.per_key - coalesce(v_run_ns[array_position(v_run_keys, v_k.key)], 0)
                        END,
                        CASE WHEN v_q.ordered AND v_k.key IS NOT NULL THEN
                            CASE WHEN coalesce(v_run_ns[array_position(v_run_keys, v_k.key)], 0) > 0 THEN 0 ELSE 1 END
                        END);
                    IF v_q.rate_per_key THEN
                        IF v_k.key IS NULL THEN
                            v_room := least(v_room, v_q.max_starts - (
                                SELECT count(*)::integer FROM jobs_queue_starts s
                                WHERE s.queue = v_q.queue AND s.concurrency_key IS NULL
                                  AND s.started_at > now() - v_q.per));
                        ELSE
                            v_room := least(v_room, v_q.max_starts - (
                                SELECT count(*)::integer FROM jobs_queue_starts s
                                WHERE s.queue = v_q.queue AND s.concurrency_key = v_k.key
                                  AND s.started_at > now() - v_q.per));
                        END IF;
                    END IF;
                    v_room := least(v_room - coalesce(v_tns[v_pos], 0), v_share, v_budget - v_taken);
                    IF v_room <= 0 OR (v_k.key IS NULL AND v_none_unkeyed) THEN
                        v_idle := v_idle + 1;
                        IF v_idle >= c_idle_keys THEN
                            v_last := v_k.key;
                            v_stopped := true;
                            EXIT;
                        END IF;
                        CONTINUE;
                    END IF;

                    IF v_k.key IS NULL THEN
                        -- Jobs without a key: first among the queue's best (room + taken +
                        -- 100) ready jobs, then 1,000 further from where the previous such
                        -- look stopped (rr_unkeyed_*, kept by the queue's row), so a job
                        -- without a key is found whatever the backlog of keyed jobs ahead of
                        -- it (_jobs_claim_unkeyed). A turn that finds none does not look
                        -- again in this claim.
                        SELECT u.kept_priority, u.kept_run_at, u.kept_id, u.rows
                        INTO v_up, v_ur, v_ui, v_found
                        FROM _jobs_claim_unkeyed(v_q.queue, v_room, v_room + v_taken + 100, v_ids, v_up, v_ur, v_ui) u;
                        SELECT coalesce(array_agg(c.row), '{}'), coalesce(array_agg(c.id), '{}'),
                               coalesce(array_agg(c.priority), '{}'), coalesce(array_agg(c.run_at), '{}')
                        INTO v_krows, v_kids, v_kpris, v_kruns
                        FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                              FROM jobs_queued q
                              WHERE q.ctid = ANY (v_found)
                              FOR UPDATE SKIP LOCKED) c;
                    ELSIF v_q.ordered THEN
                        -- The key's head (lowest id) if it is ready.
                        SELECT coalesce(array_agg(c.row), '{}'), coalesce(array_agg(c.id), '{}'),
                               coalesce(array_agg(c.priority), '{}'), coalesce(array_agg(c.run_at), '{}')
                        INTO v_krows, v_kids, v_kpris, v_kruns
                        FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                              FROM jobs_queued q
                              WHERE q.queue = v_q.queue
                                AND q.concurrency_key = v_k.key
                                AND q.id = (SELECT h.id FROM jobs_queued h
                                            WHERE h.queue = v_q.queue AND h.concurrency_key = v_k.key
                                            ORDER BY h.id
                                            LIMIT 1)
                                AND q.run_at <= now()
                              FOR UPDATE SKIP LOCKED) c;
                    ELSE
                        SELECT coalesce(array_agg(c.row), '{}'), coalesce(array_agg(c.id), '{}'),
                               coalesce(array_agg(c.priority), '{}'), coalesce(array_agg(c.run_at), '{}')
                        INTO v_krows, v_kids, v_kpris, v_kruns
                        FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                              FROM jobs_queued q
                              WHERE q.queue = v_q.queue
                                AND q.concurrency_key = v_k.key
                                AND q.run_at <= now()
                                AND q.id <> ALL (v_ids)
                              ORDER BY q.priority, q.run_at, q.id
                              LIMIT v_room
                              FOR UPDATE SKIP LOCKED) c;
                    END IF;
                    v_got := cardinality(v_kids);
                    v_none_unkeyed := v_none_unkeyed OR (v_k.key IS NULL AND v_got = 0);
                    IF v_got = 0 THEN
                        -- A bounded walk: after 1,000 keys that gave nothing (no room, or
                        -- no ready job: e.g. keys whose jobs are all in the future) the
                        -- claim stops, and the next one goes on after the last key looked
                        -- at, so every key is still reached in turn.
                        v_idle := v_idle + 1;
                        IF v_idle >= c_idle_keys THEN
                            v_last := v_k.key;
                            v_stopped := true;
                            EXIT;
                        END IF;
                        CONTINUE;
                    END IF;
                    v_rows := v_rows || v_krows;
                    v_ids := v_ids || v_kids;
                    v_pris := v_pris || v_kpris;
                    v_run_ats := v_run_ats || v_kruns;
                    v_taken := v_taken + v_got;
                    IF v_pos IS NULL THEN
                        v_tkeys := v_tkeys || v_k.key;
                        v_tns := v_tns || v_got;
                    ELSE
                        v_tns[v_pos] := v_tns[v_pos] + v_got;
                    END IF;
                    v_round_keys := v_round_keys + 1;
                    v_last := v_k.key;
                    v_moved := true;
                    EXIT WHEN v_taken >= v_budget;
                END LOOP;
                EXIT WHEN v_taken >= v_budget OR v_round_keys = 0 OR v_stopped;
                v_share := ceil((v_budget - v_taken)::numeric / v_round_keys)::integer;
            END LOOP;
            -- The next claim starts after the key taken last (NULL: the group without a key
            -- was last, so the next turn starts at the first key).
            -- A walk stopped by its bound: after the key looked at last.
            IF v_moved OR v_stopped THEN
                UPDATE jobs_queues q SET rr_cursor = v_last WHERE q.queue = v_q.queue;
            END IF;
            IF (v_up, v_ur, v_ui) IS DISTINCT FROM (v_q.rr_unkeyed_priority, v_q.rr_unkeyed_run_at, v_q.rr_unkeyed_id) THEN
                UPDATE jobs_queues q
                SET rr_unkeyed_priority = v_up, rr_unkeyed_run_at = v_ur, rr_unkeyed_id = v_ui
                WHERE q.queue = v_q.queue;
            END IF;
            CONTINUE;
        END IF;

        -- Not fair: the best v_budget jobs, in (priority, run_at, id) order, of those each
        -- key's room lets in. First among the queue's best (v_budget + 100) ready jobs of keys
        -- that their running jobs leave room (jobs of the others cannot be let in): a job's
        -- rank within its key there is its rank among all of its key's ready jobs (and an
        -- ordered key's head there is ahead of every eligible job outside), so when v_budget
        -- of them are let in (or those are all such jobs there are) they are the answer. The key's head (ordered) is probed only for the jobs that get that far,
        -- in order, until v_budget are found.
        -- The keys that their running jobs leave no room (ordered: any running; per_key: at
        -- the limit): their jobs are passed over in the scan, not counted in its bound.
        v_blocked := ARRAY(
            SELECT u.key
            FROM unnest(v_run_keys, v_run_ns) AS u(key, n)
            WHERE (v_q.ordered AND u.n > 0) OR u.n >= v_q.per_key);
        WITH prefix AS MATERIALIZED (
            SELECT q.ctid AS row, q.id, q.priority, q.run_at, q.concurrency_key AS key
            FROM jobs_queued q
            WHERE q.queue = v_q.queue
              AND q.run_at <= now()
              AND (q.concurrency_key IS NULL OR q.concurrency_key <> ALL (v_blocked))
            ORDER BY q.priority, q.run_at, q.id
            LIMIT v_budget + 100
        ), rooms AS MATERIALIZED (
            -- Once per key (the group without a key as ''), joined by hash.
            SELECT coalesce(d.key, '') AS key,
                   least(v_budget,
                         CASE WHEN d.key IS NOT NULL THEN
                             v_q.per_key - coalesce(v_run_ns[array_position(v_run_keys, d.key)], 0)
                         END,
                         CASE WHEN v_q.ordered AND d.key IS NOT NULL THEN
                             CASE WHEN coalesce(v_run_ns[array_position(v_run_keys, d.key)], 0) > 0 THEN 0 ELSE 1 END
                         END,
                         CASE WHEN v_q.rate_per_key AND d.key IS NULL THEN
                             v_q.max_starts - (SELECT count(*)::integer FROM jobs_queue_starts s
                                               WHERE s.queue = v_q.queue AND s.concurrency_key IS NULL
                                                 AND s.started_at > now() - v_q.per)
                         END,
                         CASE WHEN v_q.rate_per_key AND d.key IS NOT NULL THEN
                             v_q.max_starts - (SELECT count(*)::integer FROM jobs_queue_starts s
                                               WHERE s.queue = v_q.queue AND s.concurrency_key = d.key
                                                 AND s.started_at > now() - v_q.per)
                         END) AS n
            FROM (SELECT DISTINCT p.key FROM prefix p) d
        ), let_in AS (
            SELECT r.row, r.id, r.priority, r.run_at, r.key
            FROM (SELECT p.*, row_number() OVER (PARTITION BY p.key ORDER BY p.priority, p.run_at, p.id) AS rank
                  FROM prefix p) r
            JOIN rooms m ON m.key = coalesce(r.key, '')
            -- An ordered key's one job is its head, whatever its rank (checked below).
            WHERE r.rank <= m.n OR (v_q.ordered AND r.key IS NOT NULL AND m.n > 0)
            ORDER BY r.priority, r.run_at, r.id
            OFFSET 0
        ), picked AS (
            SELECT e.row, e.id, e.priority, e.run_at
            FROM let_in e
            WHERE NOT v_q.ordered
               OR e.key IS NULL
               OR e.id = (SELECT h.id FROM jobs_queued h
                          WHERE h.queue = v_q.queue AND h.concurrency_key = e.key
                          ORDER BY h.id
                          LIMIT 1)
            LIMIT v_budget
        )
        SELECT coalesce((SELECT array_agg(c.row ORDER BY c.priority, c.run_at, c.id) FROM picked c), '{}'),
               coalesce((SELECT array_agg(c.id ORDER BY c.priority, c.run_at, c.id) FROM picked c), '{}'),
               coalesce((SELECT array_agg(c.priority ORDER BY c.priority, c.run_at, c.id) FROM picked c), '{}'),
               coalesce((SELECT array_agg(c.run_at ORDER BY c.priority, c.run_at, c.id) FROM picked c), '{}'),
               (SELECT count(*) FROM prefix)
        INTO v_krows, v_kids, v_kpris, v_kruns, v_n;
        IF cardinality(v_kids) >= v_budget OR coalesce(v_n, 0) < v_budget + 100 THEN
            -- Locked SKIP LOCKED: a row another transaction holds (a cancel under way) is
            -- passed over.
            SELECT v_rows || coalesce(array_agg(c.row), '{}'),
                   v_ids || coalesce(array_agg(c.id), '{}'),
                   v_pris || coalesce(array_agg(c.priority), '{}'),
                   v_run_ats || coalesce(array_agg(c.run_at), '{}')
            INTO v_rows, v_ids, v_pris, v_run_ats
            FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                  FROM jobs_queued q
                  WHERE q.ctid = ANY (v_krows)
                  FOR UPDATE SKIP LOCKED) c;
            CONTINUE;
        END IF;

        -- Otherwise every key: the best jobs of every key with room are candidates (a skip
        -- scan of the queue's keys, one probe of each key's jobs), then the best v_budget of
        -- them and of the jobs without a key.
        WITH RECURSIVE keys AS (
            (SELECT q.concurrency_key AS key
             FROM jobs_queued q
             WHERE q.queue = v_q.queue AND q.concurrency_key IS NOT NULL
             ORDER BY q.concurrency_key
             LIMIT 1)
            UNION ALL
            SELECT (SELECT q.concurrency_key
                    FROM jobs_queued q
                    WHERE q.queue = v_q.queue AND q.concurrency_key > k.key
                    ORDER BY q.concurrency_key
                    LIMIT 1)
            FROM keys k
            WHERE k.key IS NOT NULL
        ), rooms AS (
            SELECT k.key,
                   least(v_budget,
                         v_q.per_key - coalesce(v_run_ns[array_position(v_run_keys, k.key)], 0),
                         CASE WHEN v_q.ordered THEN
                             CASE WHEN coalesce(v_run_ns[array_position(v_run_keys, k.key)], 0) > 0 THEN 0 ELSE 1 END
                         END,
                         CASE WHEN v_q.rate_per_key THEN
                             v_q.max_starts - (SELECT count(*)::integer FROM jobs_queue_starts s
                                               WHERE s.queue = v_q.queue AND s.concurrency_key = k.key
                                                 AND s.started_at > now() - v_q.per)
                         END) AS n
            FROM keys k
            WHERE k.key IS NOT NULL
        ), picked AS (
            SELECT c.row, c.id, c.priority, c.run_at
            FROM rooms r
            CROSS JOIN LATERAL (
                SELECT q.ctid AS row, q.id, q.priority, q.run_at
                FROM jobs_queued q
                WHERE NOT v_q.ordered
                  AND q.queue = v_q.queue
                  AND q.concurrency_key = r.key
                  AND q.run_at <= now()
                ORDER BY q.priority, q.run_at, q.id
                LIMIT greatest(0, r.n)
                FOR UPDATE SKIP LOCKED
            ) c
            UNION ALL
            -- Ordered: the key's head (lowest id), if it is ready and the key has room.
            SELECT c.row, c.id, c.priority, c.run_at
            FROM rooms r
            CROSS JOIN LATERAL (
                SELECT q.ctid AS row, q.id, q.priority, q.run_at
                FROM jobs_queued q
                WHERE v_q.ordered
                  AND r.n > 0
                  AND q.queue = v_q.queue
                  AND q.concurrency_key = r.key
                  AND q.id = (SELECT h.id FROM jobs_queued h
                              WHERE h.queue = v_q.queue AND h.concurrency_key = r.key
                              ORDER BY h.id
                              LIMIT 1)
                  AND q.run_at <= now()
                FOR UPDATE SKIP LOCKED
            ) c
        )
        SELECT coalesce(array_agg(p.row ORDER BY p.priority, p.run_at, p.id), '{}'),
               coalesce(array_agg(p.id ORDER BY p.priority, p.run_at, p.id), '{}'),
               coalesce(array_agg(p.priority ORDER BY p.priority, p.run_at, p.id), '{}'),
               coalesce(array_agg(p.run_at ORDER BY p.priority, p.run_at, p.id), '{}')
        INTO v_krows, v_kids, v_kpris, v_kruns
        FROM (SELECT * FROM picked p ORDER BY p.priority, p.run_at, p.id LIMIT v_budget) p;

        -- Jobs without a key (their own group for rate_per_key; per_key and ordered do not
        -- bind them): only those ahead of the last keyed candidate can make the cut when
        -- there are enough keyed ones; otherwise look a bounded way ahead (two statements,
        -- so that the bound is an index condition, not a filter).
        v_room := v_budget;
        IF v_q.rate_per_key THEN
            v_room := least(v_room, v_q.max_starts - (
                SELECT count(*)::integer FROM jobs_queue_starts s
                WHERE s.queue = v_q.queue AND s.concurrency_key IS NULL
                  AND s.started_at > now() - v_q.per));
        END IF;
        v_got := cardinality(v_kids);
        IF v_room <= 0 THEN
            v_urows := '{}';
            v_uids := '{}';
            v_upris := '{}';
            v_uruns := '{}';
        ELSIF v_got >= v_budget THEN
            SELECT coalesce(array_agg(c.row), '{}'), coalesce(array_agg(c.id), '{}'),
                   coalesce(array_agg(c.priority), '{}'), coalesce(array_agg(c.run_at), '{}')
            INTO v_urows, v_uids, v_upris, v_uruns
            FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                  FROM jobs_queued q
                  WHERE q.ctid = ANY (ARRAY(
                          SELECT s.row
                          FROM (SELECT q2.ctid AS row, q2.concurrency_key
                                FROM jobs_queued q2
                                WHERE q2.queue = v_q.queue
                                  AND q2.run_at <= now()
                                  AND (q2.priority, q2.run_at, q2.id) < (v_kpris[v_got], v_kruns[v_got], v_kids[v_got])
                                ORDER BY q2.priority, q2.run_at, q2.id
                                LIMIT v_budget + 100) s
                          WHERE s.concurrency_key IS NULL
                          LIMIT v_room))
                  FOR UPDATE SKIP LOCKED) c;
        ELSE
            -- The queue's best (v_budget + 100) ready jobs; when none of them lacks a key and
            -- there are more (keys held back fill them), the next 1,000 from where the
            -- previous such look stopped, as a fair queue's turn does
            -- (_jobs_claim_unkeyed), so that jobs without a key behind a held-back backlog are
            -- found all the same.
            SELECT u.kept_priority, u.kept_run_at, u.kept_id, u.rows
            INTO v_up, v_ur, v_ui, v_found
            FROM _jobs_claim_unkeyed(v_q.queue, v_room, v_budget + 100, '{}', v_q.rr_unkeyed_priority,
                                     v_q.rr_unkeyed_run_at, v_q.rr_unkeyed_id) u;
            IF (v_up, v_ur, v_ui) IS DISTINCT FROM (v_q.rr_unkeyed_priority, v_q.rr_unkeyed_run_at, v_q.rr_unkeyed_id) THEN
                UPDATE jobs_queues q
                SET rr_unkeyed_priority = v_up, rr_unkeyed_run_at = v_ur, rr_unkeyed_id = v_ui
                WHERE q.queue = v_q.queue;
            END IF;
            SELECT coalesce(array_agg(c.row), '{}'), coalesce(array_agg(c.id), '{}'),
                   coalesce(array_agg(c.priority), '{}'), coalesce(array_agg(c.run_at), '{}')
            INTO v_urows, v_uids, v_upris, v_uruns
            FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                  FROM jobs_queued q
                  WHERE q.ctid = ANY (v_found)
                  FOR UPDATE SKIP LOCKED) c;
        END IF;

        SELECT v_rows || coalesce(array_agg(u.row), '{}'),
               v_ids || coalesce(array_agg(u.id), '{}'),
               v_pris || coalesce(array_agg(u.priority), '{}'),
               v_run_ats || coalesce(array_agg(u.run_at), '{}')
        INTO v_rows, v_ids, v_pris, v_run_ats
        FROM (SELECT t.row, t.id, t.priority, t.run_at
              FROM unnest(v_krows || v_urows, v_kids || v_uids, v_kpris || v_upris, v_kruns || v_uruns)
                   AS t(row, id, priority, run_at)
              ORDER BY t.priority, t.run_at, t.id
              LIMIT v_budget) u;
    END LOOP;
    CLOSE v_settings;

    -- Queues skipped above because another transaction holds their row: only slots handed
    -- over by this transaction's own completions (see the header), max_running alone.
    -- (Not looked for when every freed queue was claimed above: the statement would be planned
    -- anew at each call, for nothing.)
    IF _jobs_claim_limited.skip_locked_queues AND cardinality(_jobs_claim_limited.freed_queues) > 0
       AND NOT _jobs_claim_limited.freed_queues <@ v_limited THEN
        FOR v_q IN
            SELECT q.queue, q.max_running, f.n
            FROM unnest(_jobs_claim_limited.freed_queues, _jobs_claim_limited.freed_slots) AS f(queue, n)
            JOIN jobs_queues q ON q.queue = f.queue
            WHERE q.queue <> ALL (v_limited)
              AND (_jobs_claim_limited.queues IS NULL OR q.queue = ANY (_jobs_claim_limited.queues))
              AND NOT q.paused
              AND q.max_running IS NOT NULL AND q.per_key IS NULL AND q.max_starts IS NULL
              AND NOT q.fair AND NOT q.ordered
            ORDER BY q.queue
        LOOP
            v_budget := least(_jobs_claim_limited.max_jobs, v_q.n, v_q.max_running - (
                SELECT coalesce(sum(c.running), 0)::integer FROM jobs_claims c WHERE c.queue = v_q.queue));
            CONTINUE WHEN v_budget <= 0;
            SELECT v_rows || coalesce(array_agg(c.row), '{}'),
                   v_ids || coalesce(array_agg(c.id), '{}'),
                   v_pris || coalesce(array_agg(c.priority), '{}'),
                   v_run_ats || coalesce(array_agg(c.run_at), '{}')
            INTO v_rows, v_ids, v_pris, v_run_ats
            FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at
                  FROM jobs_queued q
                  WHERE q.queue = v_q.queue
                    AND q.run_at <= now()
                  ORDER BY q.priority, q.run_at, q.id
                  LIMIT v_budget
                  FOR UPDATE SKIP LOCKED) c;
        END LOOP;
    END IF;

    -- The other requested queues (every queue with queued jobs for queues NULL), minus the
    -- paused ones, as jobs_claim takes them; then the best max_jobs of all candidates. When
    -- every requested queue was claimed above (the usual call: a worker of limited queues),
    -- there are no others, and this statement is not run: it is planned anew at each call
    -- (its generic plan, for any queues, is costed higher than a custom one), about 0.3 ms.
    IF _jobs_claim_limited.queues IS NOT NULL AND _jobs_claim_limited.queues <@ v_limited THEN
        IF cardinality(v_limited) > 1 THEN
            v_rows := ARRAY(
                SELECT t.row
                FROM unnest(v_rows, v_ids, v_pris, v_run_ats) AS t(row, id, priority, run_at)
                ORDER BY t.priority, t.run_at, t.id
                LIMIT _jobs_claim_limited.max_jobs);
        END IF;
        -- One queue: its candidates are within its budget (at most max_jobs), and
        -- _jobs_claim_take returns them in claim order.
    ELSE
        v_rows := ARRAY(
            WITH RECURSIVE all_queues AS (
                (SELECT q.queue FROM jobs_queued q ORDER BY q.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT q.queue FROM jobs_queued q
                        WHERE q.queue > a.queue
                        ORDER BY q.queue LIMIT 1)
                FROM all_queues a
                WHERE a.queue IS NOT NULL
            ), wanted AS (
                SELECT a.queue FROM all_queues a WHERE a.queue IS NOT NULL AND _jobs_claim_limited.queues IS NULL
                UNION
                SELECT w.queue FROM unnest(_jobs_claim_limited.queues) AS w(queue)
            ), unlimited AS (
                SELECT w.queue
                FROM wanted w
                WHERE w.queue <> ALL (v_limited)
                  -- Not only paused ones: a queue with settings that this call did not lock (paused
                  -- when the loop looked and resumed since, or limited since) gives nothing now; the
                  -- resume's NOTIFY wakes the next claim, which takes the locked path.
                  AND NOT EXISTS (SELECT FROM jobs_queues s
                                  WHERE s.queue = w.queue
                                    AND (s.paused OR s.max_running IS NOT NULL OR s.per_key IS NOT NULL
                                         OR s.max_starts IS NOT NULL OR s.fair OR s.ordered))
            ), candidates AS (
                SELECT c.row, c.id, c.priority, c.run_at
                FROM unlimited u
                CROSS JOIN LATERAL (
                    SELECT q.ctid AS row, q.id, q.priority, q.run_at
                    FROM jobs_queued q
                    WHERE q.queue = u.queue
                      AND q.run_at <= now()
                    ORDER BY q.priority, q.run_at, q.id
                    LIMIT _jobs_claim_limited.max_jobs
                    FOR UPDATE SKIP LOCKED
                ) c
                UNION ALL
                SELECT t.row, t.id, t.priority, t.run_at
                FROM unnest(v_rows, v_ids, v_pris, v_run_ats) AS t(row, id, priority, run_at)
            )
            SELECT c.row FROM candidates c
            ORDER BY c.priority, c.run_at, c.id
            LIMIT _jobs_claim_limited.max_jobs);
    END IF;
    IF cardinality(v_rate_queues) = 0 THEN
        -- Nothing to log: the jobs as _jobs_claim_take returns them (in claim order).
        RETURN QUERY SELECT * FROM _jobs_claim_take(_jobs_claim_limited.worker, _jobs_claim_limited.lease, v_rows);
        RETURN;
    END IF;
    RETURN QUERY
    WITH claimed AS (
        SELECT * FROM _jobs_claim_take(_jobs_claim_limited.worker, _jobs_claim_limited.lease, v_rows)
    ), logged AS (
        INSERT INTO jobs_queue_starts (queue, started_at, concurrency_key)
        SELECT c.queue, now(), j.concurrency_key
        FROM claimed c
        -- The job's key (one jobs_pkey probe per start; a key never changes).
        CROSS JOIN LATERAL (SELECT j1.concurrency_key FROM jobs j1 WHERE j1.id = c.id OFFSET 0) j
        WHERE c.queue = ANY (v_rate_queues)
    )
    SELECT * FROM claimed c ORDER BY c.priority, c.run_at, c.id;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_claim_limited(worker text, max_jobs integer, queues text[], lease interval, skip_locked_queues boolean, freed_queues text[], freed_slots integer[]) IS 'skiplock (private): jobs_claim for paused or limited queues; exact limits under the jobs_queues row lock.';

CREATE FUNCTION skiplock._jobs_claim_take(worker text, lease interval, rows tid[]) RETURNS SETOF skiplock.jobs_claimed
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
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

COMMENT ON FUNCTION skiplock._jobs_claim_take(worker text, lease interval, rows tid[]) IS 'skiplock (private): deletes the picked jobs_queued rows and leases their jobs, recording the claim in jobs_claims.';

CREATE FUNCTION skiplock._jobs_claim_unkeyed(queue text, max_jobs integer, front integer, passed bigint[], INOUT kept_priority integer, INOUT kept_run_at timestamp with time zone, INOUT kept_id bigint, OUT rows tid[]) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    -- Where the current look starts, and the last job it looked at.
    v_start_priority integer     := -2147483648;
    v_start_run_at   timestamptz := '-infinity';
    v_start_id       bigint      := -9223372036854775808;
    v_last_priority  integer;
    v_last_run_at    timestamptz;
    v_last_id        bigint;
    v_seen           bigint;
    c_look           CONSTANT integer := 1000;
BEGIN
    FOR v_step IN 1..2 LOOP
        IF v_step = 2 THEN
            -- From where look 1 stopped, or from the kept position if that is further on.
            v_start_priority := v_last_priority;
            v_start_run_at := v_last_run_at;
            v_start_id := v_last_id;
            IF _jobs_claim_unkeyed.kept_id IS NOT NULL
               AND (_jobs_claim_unkeyed.kept_priority, _jobs_claim_unkeyed.kept_run_at, _jobs_claim_unkeyed.kept_id)
                   > (v_start_priority, v_start_run_at, v_start_id) THEN
                v_start_priority := _jobs_claim_unkeyed.kept_priority;
                v_start_run_at := _jobs_claim_unkeyed.kept_run_at;
                v_start_id := _jobs_claim_unkeyed.kept_id;
            END IF;
        END IF;
        SELECT coalesce((array_agg(s.row ORDER BY s.priority, s.run_at, s.id)
                         FILTER (WHERE s.concurrency_key IS NULL AND s.id <> ALL (_jobs_claim_unkeyed.passed)))
                        [1:_jobs_claim_unkeyed.max_jobs], '{}'),
               count(*),
               (array_agg(s.priority ORDER BY s.priority DESC, s.run_at DESC, s.id DESC))[1],
               (array_agg(s.run_at ORDER BY s.priority DESC, s.run_at DESC, s.id DESC))[1],
               (array_agg(s.id ORDER BY s.priority DESC, s.run_at DESC, s.id DESC))[1]
        INTO rows, v_seen, v_last_priority, v_last_run_at, v_last_id
        FROM (SELECT q.ctid AS row, q.id, q.priority, q.run_at, q.concurrency_key
              FROM jobs_queued q
              WHERE q.queue = _jobs_claim_unkeyed.queue
                AND q.run_at <= now()
                AND (q.priority, q.run_at, q.id) > (v_start_priority, v_start_run_at, v_start_id)
              ORDER BY q.priority, q.run_at, q.id
              LIMIT CASE WHEN v_step = 1 THEN _jobs_claim_unkeyed.front ELSE c_look END) s;
        IF v_step = 2 THEN
            IF cardinality(rows) > 0 THEN
                kept_priority := v_start_priority;
                kept_run_at := v_start_run_at;
                kept_id := v_start_id;
            ELSIF v_seen >= c_look THEN
                kept_priority := v_last_priority;
                kept_run_at := v_last_run_at;
                kept_id := v_last_id;
            ELSE
                kept_priority := NULL;
                kept_run_at := NULL;
                kept_id := NULL;
            END IF;
        END IF;
        EXIT WHEN cardinality(rows) > 0 OR v_seen < _jobs_claim_unkeyed.front;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_claim_unkeyed(queue text, max_jobs integer, front integer, passed bigint[], INOUT kept_priority integer, INOUT kept_run_at timestamp with time zone, INOUT kept_id bigint, OUT rows tid[]) IS 'skiplock (private): the ready jobs without a key a key-walking claim may take, from two bounded looks.';

CREATE FUNCTION skiplock._jobs_claims_release(claim_ids bigint[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
DECLARE
    v_claim   record;
    v_running integer;
BEGIN
    FOR v_claim IN
        SELECT u.claim_id, count(*)::integer AS n
        FROM unnest(_jobs_claims_release.claim_ids) AS u(claim_id)
        WHERE u.claim_id IS NOT NULL
        GROUP BY u.claim_id
        ORDER BY u.claim_id
    LOOP
        UPDATE jobs_claims c
        SET running = c.running - v_claim.n
        WHERE c.claim_id = v_claim.claim_id
        RETURNING c.running INTO v_running;
        IF v_running <= 0 THEN
            DELETE FROM jobs_claims c WHERE c.claim_id = v_claim.claim_id;
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_claims_release(claim_ids bigint[]) IS 'skiplock (private): lowers the running counts of jobs_claims rows for jobs that left running, deleting rows that reach 0.';

CREATE FUNCTION skiplock._jobs_completion_deletes() RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    RETURN coalesce((SELECT s.done_retention = interval '0' FROM jobs_settings s), false)
       AND NOT EXISTS (
               SELECT FROM pg_catalog.pg_trigger t
               WHERE t.tgrelid = 'jobs'::regclass
                 AND t.tgfoid IN ('pg_catalog."RI_FKey_noaction_del"'::regproc,
                                  'pg_catalog."RI_FKey_restrict_del"'::regproc));
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_completion_deletes() IS 'skiplock (private): whether jobs_complete and jobs_complete_many delete the row (done_retention 0, no restricting foreign key) instead of keeping it done.';

CREATE FUNCTION skiplock._jobs_cron_field(func text, cron text, field text, spec text, lo integer, hi integer, names text[], names_base integer, star_hi integer) RETURNS integer[]
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $_$
#variable_conflict use_column
DECLARE
    v_element text;
    v_range   text;
    v_bounds  text[];
    v_parts   text[];
    v_first   integer;
    v_last    integer;
    v_step    integer;
    v_bound   text;
    v_value   integer;
    v_values  integer[] := '{}';
BEGIN
    FOREACH v_element IN ARRAY string_to_array(_jobs_cron_field.spec, ',') LOOP
        IF v_element = '' THEN
            PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                format('field %s has an empty list element in %L', _jobs_cron_field.field, _jobs_cron_field.cron));
        END IF;
        v_parts := string_to_array(v_element, '/');
        IF cardinality(v_parts) > 2 THEN
            PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                format('field %s: %L has more than one step in %L', _jobs_cron_field.field, v_element, _jobs_cron_field.cron));
        END IF;
        v_range := v_parts[1];
        v_step := 1;
        IF cardinality(v_parts) = 2 THEN
            -- The cast only runs on one to four digits: anything else is out of range.
            v_step := 0;
            IF v_parts[2] ~ '^[0-9]{1,4}$' THEN
                v_step := v_parts[2]::integer;
            END IF;
            IF v_step NOT BETWEEN 1 AND _jobs_cron_field.hi THEN
                PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                    format('field %s: step %L must be a number from 1 to %s in %L',
                           _jobs_cron_field.field, v_parts[2], _jobs_cron_field.hi, _jobs_cron_field.cron));
            END IF;
        END IF;

        IF v_range = '*' THEN
            v_first := _jobs_cron_field.lo;
            v_last := _jobs_cron_field.star_hi;
        ELSE
            v_bounds := string_to_array(v_range, '-');
            IF cardinality(v_bounds) > 2 THEN
                PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                    format('field %s: %L is not a value or range in %L', _jobs_cron_field.field, v_range, _jobs_cron_field.cron));
            END IF;
            FOR v_i IN 1 .. cardinality(v_bounds) LOOP
                v_bound := v_bounds[v_i];
                IF v_bound ~ '^[0-9]+$' THEN
                    -- Long digit strings are out of range, not integer overflows.
                    v_value := CASE WHEN length(v_bound) <= 4 THEN v_bound::integer ELSE 10000 END;
                ELSIF _jobs_cron_field.names IS NOT NULL
                      AND array_position(_jobs_cron_field.names, upper(v_bound)) IS NOT NULL THEN
                    v_value := array_position(_jobs_cron_field.names, upper(v_bound)) - 1 + _jobs_cron_field.names_base;
                ELSE
                    PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                        format('field %s: %L is not a number%s in %L', _jobs_cron_field.field, v_bound,
                               CASE WHEN _jobs_cron_field.names IS NOT NULL THEN ' or name' ELSE '' END,
                               _jobs_cron_field.cron));
                END IF;
                IF v_value NOT BETWEEN _jobs_cron_field.lo AND _jobs_cron_field.hi THEN
                    PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                        format('field %s: %s is out of range %s-%s in %L', _jobs_cron_field.field, v_bound,
                               _jobs_cron_field.lo, _jobs_cron_field.hi, _jobs_cron_field.cron));
                END IF;
                IF v_i = 1 THEN
                    v_first := v_value;
                END IF;
                v_last := v_value;
            END LOOP;
            -- 'a/step' runs from a to the end of the field's range.
            IF cardinality(v_bounds) = 1 AND cardinality(v_parts) = 2 THEN
                v_last := greatest(v_first, _jobs_cron_field.star_hi);
            END IF;
            IF v_first > v_last THEN
                PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                    format('field %s: range %L starts after it ends in %L', _jobs_cron_field.field, v_range, _jobs_cron_field.cron));
            END IF;
        END IF;
        v_values := v_values || ARRAY(SELECT generate_series(v_first, v_last, v_step));
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT v FROM unnest(v_values) AS v ORDER BY v);
END;
$_$;

COMMENT ON FUNCTION skiplock._jobs_cron_field(func text, cron text, field text, spec text, lo integer, hi integer, names text[], names_base integer, star_hi integer) IS 'skiplock (private): parses one cron field into its sorted values.';

CREATE FUNCTION skiplock._jobs_cron_instant(local timestamp without time zone, timezone text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_local   timestamp := _jobs_cron_instant.local;
    v_instant timestamptz;
    v_earlier timestamptz;
    v_before  timestamptz;
BEGIN
    -- AT TIME ZONE reads a skipped time with the offset before the jump (02:30 -> 03:30
    -- EDT) and a repeated time as its second, standard-time occurrence.
    v_instant := v_local AT TIME ZONE _jobs_cron_instant.timezone;
    IF (v_instant AT TIME ZONE _jobs_cron_instant.timezone) <> v_local THEN
        -- Skipped: walk to the first local minute that exists (at most the jump's length;
        -- bounded by two days for zones that skipped a whole date).
        FOR v_i IN 1 .. 2880 LOOP
            v_local := v_local + interval '1 minute';
            v_instant := v_local AT TIME ZONE _jobs_cron_instant.timezone;
            EXIT WHEN (v_instant AT TIME ZONE _jobs_cron_instant.timezone) = v_local;
        END LOOP;
        RETURN v_instant;
    END IF;
    -- Repeated: the same local time read with the offset in force three hours earlier
    -- (before any fall-back that v_instant follows; transitions are further apart).
    v_before := v_instant - interval '3 hours';
    v_earlier := (v_local - ((v_before AT TIME ZONE _jobs_cron_instant.timezone) - (v_before AT TIME ZONE 'UTC')))
                 AT TIME ZONE 'UTC';
    IF v_earlier < v_instant AND (v_earlier AT TIME ZONE _jobs_cron_instant.timezone) = v_local THEN
        RETURN v_earlier;
    END IF;
    RETURN v_instant;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_cron_instant(local timestamp without time zone, timezone text) IS 'skiplock (private): the instant of a cron run at a local time (skipped times at the jump, repeated times at their first occurrence).';

CREATE FUNCTION skiplock._jobs_cron_latest(func text, cron text, timezone text, "from" timestamp with time zone, upto timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_lo   timestamptz := _jobs_cron_latest."from";
    v_hi   timestamptz := _jobs_cron_latest.upto;
    v_mid  timestamptz;
    v_next timestamptz;
BEGIN
    v_next := _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron, v_lo, _jobs_cron_latest.timezone);
    IF v_next IS NULL OR v_next > _jobs_cron_latest.upto THEN
        RETURN _jobs_cron_latest."from";
    END IF;
    -- Invariant: the latest instant <= upto is in (v_lo, v_hi].
    WHILE v_hi - v_lo > interval '1 second' LOOP
        v_mid := v_lo + (v_hi - v_lo) / 2;
        v_next := _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron, v_mid, _jobs_cron_latest.timezone);
        IF v_next IS NOT NULL AND v_next <= _jobs_cron_latest.upto THEN
            v_lo := v_mid;
        ELSE
            v_hi := v_mid;
        END IF;
    END LOOP;
    -- (v_lo, v_hi] is at most a second long and holds the latest instant: the only one.
    RETURN _jobs_cron_next(_jobs_cron_latest.func, _jobs_cron_latest.cron, v_lo, _jobs_cron_latest.timezone);
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_cron_latest(func text, cron text, timezone text, "from" timestamp with time zone, upto timestamp with time zone) IS 'skiplock (private): the latest instant of a cron expression between an instant of it and a bound.';

CREATE FUNCTION skiplock._jobs_cron_next(func text, cron text, after timestamp with time zone, timezone text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_spec     record;
    v_local    timestamp;
    v_day      date;
    v_last_day date;
    v_start    integer;
    v_hour     integer;
    v_minute   integer;
    v_dom_ok   boolean;
    v_dow_ok   boolean;
    v_instant  timestamptz;
    v_later    timestamptz;
    v_second   timestamptz;
    v_from     timestamptz := _jobs_cron_next.after;
BEGIN
    v_spec := _jobs_cron_parse(_jobs_cron_next.func, _jobs_cron_next.cron);
    PERFORM _jobs_cron_timezone(_jobs_cron_next.func, _jobs_cron_next.timezone);
    IF _jobs_cron_next.after IS NULL OR NOT isfinite(_jobs_cron_next.after) THEN
        PERFORM _jobs_invalid(_jobs_cron_next.func, 'after', 'must be a finite timestamp');
    END IF;
    -- Outside these bounds the search itself would leave the timestamp range.
    IF _jobs_cron_next.after < timestamptz '4000-01-01 00:00:00+00 BC'
       OR _jobs_cron_next.after >= timestamptz '294000-01-01 00:00:00+00' THEN
        RETURN NULL;
    END IF;

    IF v_spec.every_seconds IS NOT NULL THEN
        -- The instants of @every are the multiples of the step since 1970-01-01 00:00 UTC,
        -- whatever the time zone: a pure function of after, so that every ticker agrees.
        RETURN timestamptz 'epoch' + make_interval(secs =>
            ((floor(extract(epoch FROM _jobs_cron_next.after) / v_spec.every_seconds) + 1) * v_spec.every_seconds)::double precision);
    END IF;

    IF v_spec.time_wildcard
       AND ((_jobs_cron_next.after - interval '3 hours') AT TIME ZONE _jobs_cron_next.timezone)
           - ((_jobs_cron_next.after - interval '3 hours') AT TIME ZONE 'UTC')
           <> ((_jobs_cron_next.after + interval '3 hours') AT TIME ZONE _jobs_cron_next.timezone)
           - ((_jobs_cron_next.after + interval '3 hours') AT TIME ZONE 'UTC') THEN
        -- A transition nearby: a local time before after's may occur again after it.
        v_from := _jobs_cron_next.after - interval '3 hours';
    END IF;
    v_local := v_from AT TIME ZONE _jobs_cron_next.timezone;
    v_day := v_local::date;
    -- Minutes into the day of the first candidate: the whole minute after after's.
    v_start := extract(hour FROM v_local)::integer * 60 + extract(minute FROM v_local)::integer + 1;
    -- Every valid expression runs within 8 years (29 February: 2096, then 2104).
    v_last_day := least(v_day + 3660, date '294000-01-01');

    WHILE v_day <= v_last_day LOOP
        IF NOT extract(month FROM v_day)::integer = ANY (v_spec.months) THEN
            v_day := (date_trunc('month', v_day) + interval '1 month')::date;
            v_start := 0;
            CONTINUE;
        END IF;
        v_dom_ok := extract(day FROM v_day)::integer = ANY (v_spec.doms);
        v_dow_ok := extract(dow FROM v_day)::integer = ANY (v_spec.dows);
        -- When both day fields are restricted, a day matching either runs (crontab(5)).
        IF (v_spec.dom_restricted AND v_spec.dow_restricted AND (v_dom_ok OR v_dow_ok))
           OR (v_dom_ok AND v_dow_ok) THEN
            FOREACH v_hour IN ARRAY v_spec.hours LOOP
                CONTINUE WHEN (v_hour + 1) * 60 <= v_start;
                FOREACH v_minute IN ARRAY v_spec.minutes LOOP
                    CONTINUE WHEN v_hour * 60 + v_minute < v_start;
                    v_instant := _jobs_cron_instant(v_day + make_interval(hours => v_hour, mins => v_minute),
                                                    _jobs_cron_next.timezone);
                    -- Passed over here: the candidates before after (when the search
                    -- started three hours early) and a local time repeated at fall-back
                    -- whose first occurrence is not later than after.
                    IF v_instant > _jobs_cron_next.after THEN
                        -- A second occurrence seen is earlier than any local time after it.
                        RETURN least(v_instant, v_second);
                    END IF;
                    IF v_spec.time_wildcard AND v_second IS NULL THEN
                        -- AT TIME ZONE reads a repeated local time as its second occurrence.
                        v_later := (v_day + make_interval(hours => v_hour, mins => v_minute))
                                   AT TIME ZONE _jobs_cron_next.timezone;
                        IF v_later > _jobs_cron_next.after
                           AND (v_later AT TIME ZONE _jobs_cron_next.timezone) = v_day + make_interval(hours => v_hour, mins => v_minute) THEN
                            v_second := v_later;
                        END IF;
                    END IF;
                END LOOP;
            END LOOP;
        END IF;
        v_day := v_day + 1;
        v_start := 0;
    END LOOP;
    RETURN v_second;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_cron_next(func text, cron text, after timestamp with time zone, timezone text) IS 'skiplock (private): jobs_cron_next, raising its errors in the name of the calling function.';

CREATE FUNCTION skiplock._jobs_cron_parse(func text, cron text, OUT minutes integer[], OUT hours integer[], OUT doms integer[], OUT months integer[], OUT dows integer[], OUT dom_restricted boolean, OUT dow_restricted boolean, OUT time_wildcard boolean, OUT every_seconds bigint) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'skiplock', 'pg_temp'
    SET "IntervalStyle" TO 'postgres'
    AS $$
#variable_conflict use_column
DECLARE
    v_expr     text;
    v_fields   text[];
    v_interval interval;
    v_seconds  numeric;
BEGIN
    IF _jobs_cron_parse.cron IS NULL OR btrim(_jobs_cron_parse.cron) = '' OR octet_length(_jobs_cron_parse.cron) > 1000 THEN
        PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron', 'must be a cron expression of at most 1000 bytes');
    END IF;
    v_expr := btrim(_jobs_cron_parse.cron, E' \t\n\r');

    IF lower(v_expr) ~ '^@every\s' THEN
        BEGIN
            v_interval := btrim(substr(v_expr, 7), E' \t\n\r')::interval;
        EXCEPTION
            WHEN data_exception THEN
                PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
                    format('@every: %L is not an interval', btrim(substr(v_expr, 7), E' \t\n\r')));
        END;
        v_seconds := extract(epoch FROM v_interval);
        IF extract(year FROM v_interval) <> 0 OR extract(month FROM v_interval) <> 0
           OR v_seconds < 1 OR v_seconds <> trunc(v_seconds) OR v_seconds > 3162240000 THEN
            PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
                format('@every: %L must be a whole number of seconds from 1 second to 100 years, without months or years', v_interval));
        END IF;
        every_seconds := v_seconds::bigint;
        RETURN;
    END IF;

    IF left(v_expr, 1) = '@' THEN
        v_expr := CASE lower(v_expr)
            WHEN '@yearly'   THEN '0 0 1 1 *'
            WHEN '@annually' THEN '0 0 1 1 *'
            WHEN '@monthly'  THEN '0 0 1 * *'
            WHEN '@weekly'   THEN '0 0 * * 0'
            WHEN '@daily'    THEN '0 0 * * *'
            WHEN '@midnight' THEN '0 0 * * *'
            WHEN '@hourly'   THEN '0 * * * *'
        END;
        IF v_expr IS NULL THEN
            PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
                format('%L is not a macro (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every <interval>)',
                       _jobs_cron_parse.cron));
        END IF;
    END IF;

    v_fields := regexp_split_to_array(v_expr, '\s+');
    IF cardinality(v_fields) <> 5 THEN
        PERFORM _jobs_invalid(_jobs_cron_parse.func, 'cron',
            format('must have 5 fields (minute hour day-of-month month day-of-week), got %s in %L',
                   cardinality(v_fields), _jobs_cron_parse.cron));
    END IF;

    minutes := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'minute', v_fields[1], 0, 59, NULL, 0, 59);
    hours := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'hour', v_fields[2], 0, 23, NULL, 0, 23);
    doms := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'day-of-month', v_fields[3], 1, 31, NULL, 0, 31);
    months := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'month', v_fields[4], 1, 12,
        '{JAN,FEB,MAR,APR,MAY,JUN,JUL,AUG,SEP,OCT,NOV,DEC}', 1, 12);
    -- 0 and 7 are both Sunday; '*' and 'a/step' end at 6, so '5/2' is Friday only.
    dows := _jobs_cron_field(_jobs_cron_parse.func, _jobs_cron_parse.cron, 'day-of-week', v_fields[5], 0, 7,
        '{SUN,MON,TUE,WED,THU,FRI,SAT}', 0, 6);
    dows := ARRAY(SELECT DISTINCT d % 7 FROM unnest(dows) AS d ORDER BY 1);
    -- crontab(5): a day field is restricted unless it starts with '*' (so '*/2' is not).
    dom_restricted := left(v_fields[3], 1) <> '*';
    dow_restricted := left(v_fields[5], 1) <> '*';
    -- Vixie cron's MIN_STAR and HR_STAR: '*/15' counts, '0-59' does not.
    time_wildcard := left(v_fields[1], 1) = '*' OR left(v_fields[2], 1) = '*';
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_cron_parse(func text, cron text, OUT minutes integer[], OUT hours integer[], OUT doms integer[], OUT months integer[], OUT dows integer[], OUT dom_restricted boolean, OUT dow_restricted boolean, OUT time_wildcard boolean, OUT every_seconds bigint) IS 'skiplock (private): parses a cron expression into the values of its fields, or an @every step.';

CREATE FUNCTION skiplock._jobs_cron_timezone(func text, timezone text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF _jobs_cron_timezone.timezone IS NULL OR _jobs_cron_timezone.timezone = ''
       OR octet_length(_jobs_cron_timezone.timezone) > 200 THEN
        PERFORM _jobs_invalid(_jobs_cron_timezone.func, 'timezone', 'must be a time zone name such as ''Europe/Berlin''');
    END IF;
    BEGIN
        PERFORM timestamptz '2000-01-01 00:00:00+00' AT TIME ZONE _jobs_cron_timezone.timezone;
    EXCEPTION
        WHEN invalid_parameter_value OR feature_not_supported THEN
            PERFORM _jobs_invalid(_jobs_cron_timezone.func, 'timezone',
                format('%L is not a known time zone (use an IANA name such as ''Europe/Berlin'')', _jobs_cron_timezone.timezone));
    END;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_cron_timezone(func text, timezone text) IS 'skiplock (private): raises 22023 naming timezone unless PostgreSQL knows the zone.';

CREATE FUNCTION skiplock._jobs_dead_cancelled_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.state NOT IN ('dead', 'cancelled')) THEN
        DELETE FROM jobs_dead_cancelled d WHERE d.id = OLD.id;
    ELSE
        INSERT INTO jobs_dead_cancelled (id, state, queue, finished_at)
        VALUES (NEW.id, NEW.state, NEW.queue, NEW.finished_at)
        ON CONFLICT (id) DO UPDATE SET state = excluded.state, finished_at = excluded.finished_at;
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_dead_cancelled_sync() IS 'skiplock (private): trigger keeping jobs_dead_cancelled in step with the dead and cancelled jobs.';

CREATE FUNCTION skiplock._jobs_dependencies_release() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    DELETE FROM jobs_dependencies d WHERE d.child_id = OLD.id;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_dependencies_release() IS 'skiplock (private): trigger dropping a deleted job''s dependency rows.';

CREATE FUNCTION skiplock._jobs_enqueue_child(kind text, payload jsonb, queue text, run_at timestamp with time zone, priority integer, max_attempts integer, unique_key text, concurrency_key text, meta jsonb, notify boolean, parents bigint[], on_parent_failure text, notify_finished boolean, id bigint, workflow_id bigint, workflow_step text, unique_for interval DEFAULT NULL::interval) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
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

COMMENT ON FUNCTION skiplock._jobs_enqueue_child(kind text, payload jsonb, queue text, run_at timestamp with time zone, priority integer, max_attempts integer, unique_key text, concurrency_key text, meta jsonb, notify boolean, parents bigint[], on_parent_failure text, notify_finished boolean, id bigint, workflow_id bigint, workflow_step text, unique_for interval) IS 'skiplock (private): inserts a job with parents (waiting, queued or cancelled by their states) and its dependencies.';

CREATE FUNCTION skiplock._jobs_enqueue_duplicate(queue text, unique_key text, on_duplicate text, new_id bigint, payload jsonb, run_at timestamp with time zone, priority integer, max_attempts integer, notify boolean, kind text, caller text, kind_parameter text, OUT id bigint, OUT not_before timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
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

COMMENT ON FUNCTION skiplock._jobs_enqueue_duplicate(queue text, unique_key text, on_duplicate text, new_id bigint, payload jsonb, run_at timestamp with time zone, priority integer, max_attempts integer, notify boolean, kind text, caller text, kind_parameter text, OUT id bigint, OUT not_before timestamp with time zone) IS 'skiplock (private): an enqueue meeting its unique_key taken: keep, replace in place, supersede a running job, or take over an ended period.';

CREATE FUNCTION skiplock._jobs_errors_append(errors jsonb, entry jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $_$
    SELECT CASE
        WHEN jsonb_array_length(_jobs_errors_append.errors) < 100
            THEN _jobs_errors_append.errors || jsonb_build_array(_jobs_errors_append.entry)
        -- the first, the newest 98 already there, and the new one: 100
        ELSE jsonb_build_array(_jobs_errors_append.errors -> 0)
             || jsonb_path_query_array(_jobs_errors_append.errors, '$[last - 97 to last]')
             || jsonb_build_array(_jobs_errors_append.entry)
    END;
$_$;

COMMENT ON FUNCTION skiplock._jobs_errors_append(errors jsonb, entry jsonb) IS 'skiplock (private): appends an entry to a job''s errors history, keeping the first entry and the newest 99.';

CREATE FUNCTION skiplock._jobs_finished(ids bigint[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
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

COMMENT ON FUNCTION skiplock._jobs_finished(ids bigint[]) IS 'skiplock (private): NOTIFYs jobs_finished and resolves the dependencies on jobs that just finished: releases or cancels their children.';

CREATE FUNCTION skiplock._jobs_finished_cascade() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    IF current_setting('skiplock.cascading', true) IS DISTINCT FROM 'on' THEN
        PERFORM _jobs_finished(ARRAY[NEW.id]);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_finished_cascade() IS 'skiplock (private): trigger calling _jobs_finished for jobs others wait for that become dead or cancelled.';

CREATE FUNCTION skiplock._jobs_invalid(func text, param text, problem text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('%s: %s %s', _jobs_invalid.func, _jobs_invalid.param, _jobs_invalid.problem),
        COLUMN  = _jobs_invalid.param;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_invalid(func text, param text, problem text) IS 'skiplock (private): raises SQLSTATE 22023 naming the bad parameter.';

CREATE FUNCTION skiplock._jobs_parent_results(workflow_id bigint, parents bigint[]) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_size bigint;
BEGIN
    -- Results that take less than 512 kB as stored (compressed or not) cannot overflow:
    -- neither pglz nor lz4 expands data more than 255 times. Larger ones are measured as the
    -- object would hold them (each result uncompressed, with a key of at most 200 bytes and
    -- its entry), rather than built and caught failing (a subtransaction per claimed child).
    SELECT sum(pg_column_size(p.result)) INTO v_size
    FROM jobs p
    WHERE p.id = ANY (_jobs_parent_results.parents);
    IF v_size >= 524288 THEN
        SELECT sum(pg_column_size(jsonb_build_array(p.result)) + 256) INTO v_size
        FROM jobs p
        WHERE p.id = ANY (_jobs_parent_results.parents);
        IF v_size > 268435455 THEN
            RETURN NULL;
        END IF;
    END IF;
    RETURN (SELECT jsonb_object_agg(CASE WHEN p.workflow_id = _jobs_parent_results.workflow_id
                                         THEN p.workflow_step ELSE p.id::text END,
                                    p.result)
            FROM jobs p
            WHERE p.id = ANY (_jobs_parent_results.parents));
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_parent_results(workflow_id bigint, parents bigint[]) IS 'skiplock (private): a claimed job''s parents'' results, by step name within its workflow, else by id; NULL when too large.';

CREATE FUNCTION skiplock._jobs_prunable(id bigint, workflow_id bigint, has_children boolean, cutoff timestamp with time zone) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
    SELECT (_jobs_prunable.workflow_id IS NULL
            OR NOT EXISTS (SELECT FROM jobs w
                           WHERE w.workflow_id = _jobs_prunable.workflow_id
                             AND (w.state NOT IN ('done', 'dead', 'cancelled')
                                  OR w.finished_at >= _jobs_prunable.cutoff)))
       AND (_jobs_prunable.has_children IS NULL
            OR NOT EXISTS (SELECT FROM jobs_dependencies d
                           JOIN jobs c ON c.id = d.child_id
                           WHERE d.parent_id = _jobs_prunable.id
                             AND c.state NOT IN ('done', 'dead', 'cancelled')));
$$;

COMMENT ON FUNCTION skiplock._jobs_prunable(id bigint, workflow_id bigint, has_children boolean, cutoff timestamp with time zone) IS 'skiplock (private): false while a finished job''s children or workflow still need it.';

CREATE FUNCTION skiplock._jobs_queued_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    IF OLD.state = 'queued' THEN
        DELETE FROM jobs_queued q
        WHERE q.ctid = ANY (ARRAY(
                SELECT r.ctid
                FROM jobs_queued r
                WHERE (r.queue, r.priority, r.run_at, r.id) = (OLD.queue, OLD.priority, OLD.run_at, OLD.id)
                FOR UPDATE SKIP LOCKED));
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = 'queued' THEN
        INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
        VALUES (NEW.queue, NEW.priority, NEW.run_at, NEW.id, NEW.concurrency_key);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_queued_sync() IS 'skiplock (private): trigger keeping jobs_queued in step with jobs that become queued or change while queued.';

CREATE FUNCTION skiplock._jobs_revive(ids bigint[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[] := _jobs_revive.ids;
BEGIN
    WHILE cardinality(v_ids) > 0 LOOP
        -- A child that another parent's end would cancel now stays cancelled, in that
        -- parent's name: retrying that one brings it back.
        UPDATE jobs c
        SET cancelled_by = o.parent_id,
            last_error = format('parent %s ended %s', o.parent_id, o.state)
        FROM jobs_dependencies d,
             LATERAL (SELECT d2.parent_id, p2.state
                      FROM jobs_dependencies d2
                      JOIN jobs p2 ON p2.id = d2.parent_id
                      WHERE d2.child_id = d.child_id
                        AND NOT d2.resolved
                        AND d2.parent_id <> d.parent_id
                        AND p2.state IN ('dead', 'cancelled')
                      ORDER BY d2.parent_id
                      LIMIT 1) AS o
        WHERE d.parent_id = ANY (v_ids)
          AND NOT d.resolved
          AND c.id = d.child_id
          AND c.cancelled_by = d.parent_id
          AND c.state = 'cancelled';
        WITH revived AS (
            UPDATE jobs c
            SET state = 'waiting',
                finished_at = NULL,
                cancelled_by = NULL
            FROM jobs_dependencies d
            WHERE d.parent_id = ANY (v_ids)
              AND NOT d.resolved
              AND c.id = d.child_id
              AND c.cancelled_by = d.parent_id
              AND c.state = 'cancelled'
              -- A live job took the child's key meanwhile: that job does the child's work.
              AND (c.unique_key IS NULL
                   OR NOT EXISTS (SELECT FROM jobs_unique_keys k
                                  WHERE k.queue = c.queue AND k.unique_key = c.unique_key
                                    -- (a unique_for period of its own, or one that is over, gives way)
                                    AND NOT (k.held_until IS NOT NULL AND (k.id = c.id OR k.held_until <= now()))))
            RETURNING c.id, c.has_children
        )
        SELECT ARRAY(SELECT r.id FROM revived r WHERE r.has_children ORDER BY r.id) INTO v_ids;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_revive(ids bigint[]) IS 'skiplock (private): brings the descendants cancelled by the end of retried jobs back to waiting.';

CREATE FUNCTION skiplock._jobs_truncate_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    TRUNCATE jobs_queued, jobs_claims, jobs_unique_keys, jobs_dead_cancelled, jobs_dependencies;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_truncate_sync() IS 'skiplock (private): trigger emptying the tables that list jobs when jobs is truncated.';

CREATE FUNCTION skiplock._jobs_unique_key_superseded() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM jobs_unique_keys k
                   WHERE k.queue = NEW.queue AND k.unique_key = NEW.unique_key AND k.id = NEW.id) THEN
        UPDATE jobs j
        SET state = 'cancelled',
            finished_at = now(),
            last_error = format('superseded by job %s', j.superseded_by),
            errors = _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                      'error', format('superseded by job %s', j.superseded_by)))
        WHERE j.id = NEW.id AND j.state = 'queued';
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_unique_key_superseded() IS 'skiplock (private): trigger cancelling a job superseded by a replace instead of queueing it again.';

CREATE FUNCTION skiplock._jobs_unique_key_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.state IN ('done', 'dead', 'cancelled') THEN
        IF OLD.unique_for IS NULL THEN
            DELETE FROM jobs_unique_keys k
            WHERE k.queue = OLD.queue AND k.unique_key = OLD.unique_key AND k.id = OLD.id;
        ELSIF TG_OP = 'DELETE' THEN
            -- Throttle: the key stays taken for unique_for after the job's end (here a
            -- completion that deletes the row).
            UPDATE jobs_unique_keys k
            SET held_until = now() + OLD.unique_for
            WHERE k.queue = OLD.queue AND k.unique_key = OLD.unique_key AND k.id = OLD.id;
        ELSE
            UPDATE jobs_unique_keys k
            SET held_until = coalesce(NEW.finished_at, now()) + OLD.unique_for
            WHERE k.queue = OLD.queue AND k.unique_key = OLD.unique_key AND k.id = OLD.id;
        END IF;
    ELSE
        DELETE FROM jobs_unique_keys k
        WHERE k.queue = NEW.queue AND k.unique_key = NEW.unique_key
          AND k.held_until IS NOT NULL
          AND (k.id = NEW.id OR k.held_until <= now());
        INSERT INTO jobs_unique_keys (queue, unique_key, id) VALUES (NEW.queue, NEW.unique_key, NEW.id);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION skiplock._jobs_unique_key_sync() IS 'skiplock (private): trigger keeping jobs_unique_keys in step with the live keyed jobs.';

CREATE FUNCTION skiplock.jobs_backoff(attempt integer) RETURNS interval
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_settings jobs_settings;
    v_seconds  double precision;
BEGIN
    IF jobs_backoff.attempt IS NULL OR jobs_backoff.attempt < 1 THEN
        PERFORM _jobs_invalid('jobs_backoff', 'attempt', 'must be at least 1');
    END IF;

    SELECT * INTO v_settings FROM jobs_settings;

    -- Computed in float seconds: interval arithmetic overflows at 2^31 days, which a large
    -- base reaches within a few dozen attempts; the cap brings the value back into range.
    v_seconds := least(extract(epoch FROM v_settings.backoff_cap),
                       extract(epoch FROM v_settings.backoff_base)
                           * power(2::double precision, least(jobs_backoff.attempt - 1, 100)));

    RETURN make_interval(secs => v_seconds * (1 + v_settings.backoff_jitter * (2 * random() - 1)));
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_backoff(attempt integer) IS 'skiplock: retry delay after the given attempt: exponential from jobs_settings.backoff_base, capped at backoff_cap, with jitter of at most backoff_jitter (<= 25%).';

CREATE FUNCTION skiplock.jobs_cancel(id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
    v_state jobs_state;
    v_claim bigint;
BEGIN
    IF jobs_cancel.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'id', 'must not be NULL');
    END IF;

    -- A queued job leaves jobs_queued first: the order claims lock in. A claim holding the
    -- row is waited for; the job is then running, and cancelled as such.
    DELETE FROM jobs_queued q
    WHERE (q.queue, q.priority, q.run_at, q.id) =
          (SELECT j.queue, j.priority, j.run_at, j.id FROM jobs j WHERE j.id = jobs_cancel.id AND j.state = 'queued');

    SELECT j.state, j.claim_id INTO v_state, v_claim
    FROM jobs j
    WHERE j.id = jobs_cancel.id
    FOR NO KEY UPDATE;
    IF v_state IS NULL OR v_state NOT IN ('waiting', 'queued', 'running') THEN
        RETURN false;
    END IF;

    UPDATE jobs j
    SET state = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL,
        lease_role = NULL
    WHERE j.id = jobs_cancel.id
    RETURNING j.queue INTO v_queue;
    IF v_state = 'running' THEN
        PERFORM _jobs_claims_release(ARRAY[v_claim]);
    END IF;

    -- A slot of a concurrency-limited queue may have come back (when the job was running):
    -- wake the workers waiting for one.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_cancel(id bigint) IS 'skiplock: waiting, queued or running -> cancelled; the holder''s later complete returns false and fail returns NULL.';

CREATE FUNCTION skiplock.jobs_cancel(id bigint, attempt integer, error text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
    v_claim bigint;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_cancel.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'id', 'must not be NULL');
    END IF;
    IF jobs_cancel.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_cancel.error IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel', 'error', 'must not be NULL');
    END IF;

    UPDATE jobs j
    SET state = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL,
        lease_role = NULL,
        last_error = left(jobs_cancel.error, 10000),
        errors = _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                  'error', left(jobs_cancel.error, 10000),
                                                                  'worker', j.lease_holder))
    WHERE j.id = jobs_cancel.id
      AND j.state = 'running'
      AND j.attempts = jobs_cancel.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.queue, j.claim_id INTO v_queue, v_claim;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_cancel(id bigint, attempt integer, error text) IS 'skiplock: running -> cancelled when held at this attempt (fenced), recording error; for a handler giving up on its job.';

CREATE FUNCTION skiplock.jobs_cancel_many(ids bigint[] DEFAULT NULL::bigint[], queue text DEFAULT NULL::text, kind text DEFAULT NULL::text, states skiplock.jobs_state[] DEFAULT '{queued}'::skiplock.jobs_state[], max_jobs integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_queued  bigint[] := '{}';
    v_running bigint[] := '{}';
    v_waiting bigint[] := '{}';
    v_count   integer;
    v_claims  bigint[];
    v_queues  text[];
BEGIN
    PERFORM _jobs_check_bulk_args('jobs_cancel_many', jobs_cancel_many.states, '{waiting, queued, running}',
                                  jobs_cancel_many.max_jobs);

    -- Queued jobs leave jobs_queued first (the order claims lock in): their rows there are
    -- taken SKIP LOCKED (a claim holding one gets the job) and deleted.
    IF 'queued' = ANY (jobs_cancel_many.states) THEN
        WITH picked AS (
            SELECT q.ctid AS row
            FROM jobs j
            JOIN jobs_queued q ON (q.queue, q.priority, q.run_at, q.id) = (j.queue, j.priority, j.run_at, j.id)
            WHERE j.state = 'queued'
              AND (jobs_cancel_many.ids IS NULL OR j.id = ANY (jobs_cancel_many.ids))
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            LIMIT jobs_cancel_many.max_jobs
            FOR UPDATE OF q SKIP LOCKED
        ), taken AS (
            DELETE FROM jobs_queued q
            WHERE q.ctid = ANY (ARRAY(SELECT picked.row FROM picked))
            RETURNING q.id
        )
        SELECT coalesce(array_agg(taken.id), '{}') INTO v_queued FROM taken;
    END IF;
    -- Running jobs: those listed by jobs_claims (of the queue) and still running, or the ids.
    IF 'running' = ANY (jobs_cancel_many.states) AND cardinality(v_queued) < jobs_cancel_many.max_jobs THEN
        v_running := ARRAY(
            SELECT j.id
            FROM jobs j
            WHERE j.id = ANY (coalesce(jobs_cancel_many.ids,
                                       ARRAY(SELECT u.id
                                             FROM jobs_claims c
                                             CROSS JOIN LATERAL unnest(c.ids) AS u(id)
                                             WHERE jobs_cancel_many.queue IS NULL OR c.queue = jobs_cancel_many.queue)))
              AND j.state = 'running'
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            LIMIT jobs_cancel_many.max_jobs - cardinality(v_queued)
            FOR NO KEY UPDATE SKIP LOCKED);
    END IF;

    -- Waiting jobs: each has an unresolved jobs_dependencies row (or the ids).
    IF 'waiting' = ANY (jobs_cancel_many.states)
       AND cardinality(v_queued) + cardinality(v_running) < jobs_cancel_many.max_jobs THEN
        v_waiting := ARRAY(
            SELECT j.id
            FROM jobs j
            WHERE j.id = ANY (coalesce(jobs_cancel_many.ids,
                                       ARRAY(SELECT DISTINCT d.child_id FROM jobs_dependencies d WHERE NOT d.resolved)))
              AND j.state = 'waiting'
              AND (jobs_cancel_many.queue IS NULL OR j.queue = jobs_cancel_many.queue)
              AND (jobs_cancel_many.kind IS NULL OR j.kind = jobs_cancel_many.kind)
            ORDER BY j.id
            LIMIT jobs_cancel_many.max_jobs - cardinality(v_queued) - cardinality(v_running)
            FOR NO KEY UPDATE SKIP LOCKED);
    END IF;

    -- The same change as jobs_cancel(id), which is what fences the holder: its calls quote
    -- (id, attempt) and require state = 'running'.
    WITH cancelled AS (
        UPDATE jobs j
        SET state = 'cancelled',
            finished_at = now(),
            lease_expires_at = NULL,
            lease_role = NULL
        WHERE j.id = ANY (v_queued || v_running || v_waiting)
          AND j.state IN ('waiting', 'queued', 'running')
        RETURNING j.id, j.queue, j.claim_id
    )
    SELECT count(*)::integer,
           coalesce(array_agg(c.claim_id) FILTER (WHERE c.id = ANY (v_running)), '{}'),
           coalesce(array_agg(DISTINCT c.queue), '{}')
    INTO v_count, v_claims, v_queues
    FROM cancelled c;
    PERFORM _jobs_claims_release(v_claims);

    -- As jobs_cancel: slots of concurrency-limited queues may have come back, so wake the
    -- workers waiting for one (once per queue).
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = ANY (v_queues)
      AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_cancel_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) IS 'skiplock: jobs_cancel for up to max_jobs jobs matching the filters (default: queued jobs); fences holders; skips locked rows; returns the count.';

CREATE FUNCTION skiplock.jobs_cancel_workflow(workflow_id bigint) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_id        bigint;
    v_open      bigint[];
    v_cancelled integer;
BEGIN
    IF jobs_cancel_workflow.workflow_id IS NULL THEN
        PERFORM _jobs_invalid('jobs_cancel_workflow', 'workflow_id', 'must not be NULL');
    END IF;
    v_open := ARRAY(SELECT j.id FROM jobs j
                    WHERE j.workflow_id = jobs_cancel_workflow.workflow_id
                      AND j.state NOT IN ('done', 'dead', 'cancelled'));
    -- Queued steps leave jobs_queued first (the order claims lock in), then every unfinished
    -- step's row is locked in id order before any is cancelled: a step's cancellation locks
    -- its children (the cascade), and a worker completing another step locks them too, after
    -- its own step, which this call would otherwise wait for while holding them.
    DELETE FROM jobs_queued q
    USING jobs j
    WHERE j.id = ANY (v_open)
      AND j.state = 'queued'
      AND (q.queue, q.priority, q.run_at, q.id) = (j.queue, j.priority, j.run_at, j.id);
    PERFORM 1 FROM jobs j WHERE j.id = ANY (v_open) ORDER BY j.id FOR NO KEY UPDATE;
    -- A step's cancellation also cancels its waiting children, whose own jobs_cancel then
    -- returns false; a step a cancelled parent released (on_parent_failure 'run') is queued
    -- when the loop reaches it.
    FOR v_id IN SELECT u FROM unnest(v_open) AS u ORDER BY u LOOP
        PERFORM jobs_cancel(v_id);
    END LOOP;
    SELECT count(*) INTO v_cancelled FROM jobs j WHERE j.id = ANY (v_open) AND j.state = 'cancelled';
    RETURN v_cancelled;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_cancel_workflow(workflow_id bigint) IS 'skiplock: cancels every unfinished step of a workflow (fencing running ones); returns how many.';

CREATE FUNCTION skiplock.jobs_checkpoint(id bigint, attempt integer, step text, value jsonb) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_login regrole := to_regrole(quote_ident(session_user));
    v_size  integer;
BEGIN
    IF jobs_checkpoint.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'id', 'must not be NULL');
    END IF;
    IF jobs_checkpoint.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_checkpoint.step IS NULL OR jobs_checkpoint.step = '' OR octet_length(jobs_checkpoint.step) > 200 THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'step', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_checkpoint.value IS NULL THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'value', 'must not be NULL (use ''null''::jsonb for no value)');
    END IF;
    IF octet_length(jobs_checkpoint.value::text) > 1048576 THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'value', 'must be at most 1 MB (as JSON text)');
    END IF;

    UPDATE jobs j
    SET checkpoints = coalesce(j.checkpoints, '{}') || jsonb_build_object(jobs_checkpoint.step, jobs_checkpoint.value)
    WHERE j.id = jobs_checkpoint.id
      AND j.state = 'running'
      AND j.attempts = jobs_checkpoint.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING octet_length(j.checkpoints::text) INTO v_size;
    IF v_size > 16777216 THEN
        PERFORM _jobs_invalid('jobs_checkpoint', 'value', 'would make the job''s checkpoints larger than 16 MB together');
    END IF;
    RETURN v_size IS NOT NULL;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_checkpoint(id bigint, attempt integer, step text, value jsonb) IS 'skiplock: saves a finished step''s value for the job''s later attempts, when the caller still holds the job (fenced); returns whether it did.';

CREATE FUNCTION skiplock.jobs_claim(worker text, max_jobs integer DEFAULT 1, queues text[] DEFAULT NULL::text[], lease interval DEFAULT '00:05:00'::interval) RETURNS SETOF skiplock.jobs_claimed
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    -- The jobs_queued rows picked, locked until the transaction ends.
    v_rows tid[];
    -- A requested queue is paused, limited or shaped.
    v_limited boolean;
BEGIN
    IF jobs_claim.worker IS NULL OR jobs_claim.worker = '' OR octet_length(jobs_claim.worker) > 200 THEN
        PERFORM _jobs_invalid('jobs_claim', 'worker', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_claim.max_jobs IS NULL OR jobs_claim.max_jobs < 1 OR jobs_claim.max_jobs > 10000 THEN
        PERFORM _jobs_invalid('jobs_claim', 'max_jobs', 'must be between 1 and 10000');
    END IF;
    IF array_ndims(jobs_claim.queues) > 1 THEN
        PERFORM _jobs_invalid('jobs_claim', 'queues', 'must be a one-dimensional array');
    END IF;
    IF jobs_claim.queues IS NOT NULL
       AND (cardinality(jobs_claim.queues) = 0 OR array_position(jobs_claim.queues, NULL) IS NOT NULL) THEN
        PERFORM _jobs_invalid('jobs_claim', 'queues', 'must be NULL (all queues) or a non-empty array without NULLs');
    END IF;
    IF jobs_claim.lease IS NULL OR jobs_claim.lease <= interval '0' OR jobs_claim.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_claim', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    -- The fast path's only cost: queues without settings have no row here. Two statements, so
    -- that the one plan each keeps (see plan_cache_mode above) probes jobs_queues_pkey for the
    -- queues named (a plan for both cases would read every row of jobs_queues).
    IF jobs_claim.queues IS NULL THEN
        v_limited := EXISTS (
            SELECT FROM jobs_queues q
            WHERE q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                  OR q.fair OR q.ordered);
    ELSE
        v_limited := EXISTS (
            SELECT FROM jobs_queues q
            WHERE q.queue = ANY (jobs_claim.queues)
              AND (q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                   OR q.fair OR q.ordered));
    END IF;
    IF v_limited THEN
        RETURN QUERY
        SELECT * FROM _jobs_claim_limited(jobs_claim.worker, jobs_claim.max_jobs, jobs_claim.queues, jobs_claim.lease);
        RETURN;
    END IF;

    IF cardinality(jobs_claim.queues) = 1 THEN
        -- The common case, one queue: a single ordered range scan of jobs_ready_idx.
        v_rows := ARRAY(
            SELECT q.ctid
            FROM jobs_queued q
            WHERE q.queue = jobs_claim.queues[array_lower(jobs_claim.queues, 1)]
              AND q.run_at <= now()
            ORDER BY q.priority, q.run_at, q.id
            LIMIT jobs_claim.max_jobs
            FOR UPDATE SKIP LOCKED);
    ELSE
        -- Several or all queues: take the best max_jobs of each queue (each an ordered scan of
        -- jobs_ready_idx), then the best max_jobs of those. For all queues the queue names come
        -- from a skip scan of the same index, one probe per queue that has queued jobs.
        v_rows := ARRAY(
            WITH RECURSIVE all_queues AS (
                (SELECT q.queue FROM jobs_queued q ORDER BY q.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT q.queue FROM jobs_queued q
                        WHERE q.queue > a.queue
                        ORDER BY q.queue LIMIT 1)
                FROM all_queues a
                WHERE a.queue IS NOT NULL
            ), wanted AS (
                SELECT a.queue FROM all_queues a WHERE a.queue IS NOT NULL AND jobs_claim.queues IS NULL
                UNION
                SELECT w.queue FROM unnest(jobs_claim.queues) AS w(queue)
            ), candidates AS (
                SELECT c.row, c.priority, c.run_at, c.id
                FROM wanted w
                CROSS JOIN LATERAL (
                    SELECT q.ctid AS row, q.priority, q.run_at, q.id
                    FROM jobs_queued q
                    WHERE q.queue = w.queue
                      AND q.run_at <= now()
                    ORDER BY q.priority, q.run_at, q.id
                    LIMIT jobs_claim.max_jobs
                    FOR UPDATE SKIP LOCKED
                ) c
            )
            SELECT c.row FROM candidates c
            ORDER BY c.priority, c.run_at, c.id
            LIMIT jobs_claim.max_jobs);
    END IF;
    RETURN QUERY SELECT * FROM _jobs_claim_take(jobs_claim.worker, jobs_claim.lease, v_rows);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_claim(worker text, max_jobs integer, queues text[], lease interval) IS 'skiplock: leases up to max_jobs ready jobs (priority, run_at, id order; SKIP LOCKED) to worker and returns them with their attempt (fencing token).';

CREATE FUNCTION skiplock.jobs_complete(id bigint, attempt integer, result jsonb DEFAULT NULL::jsonb) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
    v_claim bigint;
    v_waited boolean;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_complete.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_complete', 'id', 'must not be NULL');
    END IF;
    IF jobs_complete.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_complete', 'attempt', 'must not be NULL');
    END IF;
    IF octet_length(jobs_complete.result::text) > 1048576 THEN
        PERFORM _jobs_invalid('jobs_complete', 'result', 'must be at most 1 MB (as JSON text)');
    END IF;

    IF _jobs_completion_deletes() THEN
        -- A done row nobody keeps: a delete inserts no index entry (an update to done
        -- inserts one into jobs_pkey) and leaves one dead row version instead of two.
        DELETE FROM jobs j
        WHERE j.id = jobs_complete.id
          AND j.state = 'running'
          AND j.attempts = jobs_complete.attempt
          AND (j.lease_role IS NULL OR j.lease_role = v_login)
          -- A job others wait for is kept (below).
          AND j.has_children IS NULL AND j.notify_finished IS NULL AND j.workflow_id IS NULL
        RETURNING j.queue, j.claim_id INTO v_queue, v_claim;
    END IF;
    IF v_queue IS NULL THEN
        UPDATE jobs j
        SET state = 'done',
            finished_at = now(),
            lease_expires_at = NULL,
            lease_role = NULL,
            result = jobs_complete.result
        WHERE j.id = jobs_complete.id
          AND j.state = 'running'
          AND j.attempts = jobs_complete.attempt
          AND (j.lease_role IS NULL OR j.lease_role = v_login)
        RETURNING j.queue, j.claim_id, j.has_children OR j.notify_finished INTO v_queue, v_claim, v_waited;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        IF v_waited THEN
            PERFORM _jobs_finished(ARRAY[jobs_complete.id]);
        END IF;
    END IF;
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM jobs_queues q
    WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_complete(id bigint, attempt integer, result jsonb) IS 'skiplock: running -> done, keeping result (deleted with done_retention 0) when the job is still running at this attempt (fenced); returns whether it did.';

CREATE FUNCTION skiplock.jobs_complete_and_claim(worker text, ids bigint[], attempts integer[], max_jobs integer DEFAULT 1, queues text[] DEFAULT NULL::text[], lease interval DEFAULT '00:05:00'::interval, results jsonb[] DEFAULT NULL::jsonb[]) RETURNS TABLE(completed bigint[], id bigint, queue text, kind text, payload jsonb, attempt integer, max_attempts integer, priority integer, run_at timestamp with time zone, lease_expires_at timestamp with time zone, created_at timestamp with time zone, meta jsonb, parent_results jsonb, checkpoints jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_completed    bigint[];
    v_limited      boolean;
    v_held_ids     bigint[]  := '{}';
    v_held_queues  text[]    := '{}';
    v_freed_queues text[]    := '{}';
    v_freed_slots  integer[] := '{}';
BEGIN
    -- The same checks as the two functions make, here so that an error names this function
    -- and nothing is completed before a bad claim argument is found; max_jobs may also be 0.
    PERFORM _jobs_check_fence_arrays('jobs_complete_and_claim', jobs_complete_and_claim.ids,
                                     jobs_complete_and_claim.attempts);
    IF jobs_complete_and_claim.results IS NOT NULL
       AND (array_ndims(jobs_complete_and_claim.results) > 1
            OR coalesce(cardinality(jobs_complete_and_claim.results), 0) <> cardinality(jobs_complete_and_claim.ids)
            OR EXISTS (SELECT FROM unnest(jobs_complete_and_claim.results) AS r WHERE octet_length(r::text) > 1048576)) THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'results',
                              'must be NULL or a one-dimensional array as long as ids of results of at most 1 MB');
    END IF;
    IF jobs_complete_and_claim.worker IS NULL OR jobs_complete_and_claim.worker = ''
       OR octet_length(jobs_complete_and_claim.worker) > 200 THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'worker', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_complete_and_claim.max_jobs IS NULL OR jobs_complete_and_claim.max_jobs < 0
       OR jobs_complete_and_claim.max_jobs > 10000 THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'max_jobs', 'must be between 0 and 10000');
    END IF;
    IF array_ndims(jobs_complete_and_claim.queues) > 1 THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'queues', 'must be a one-dimensional array');
    END IF;
    IF jobs_complete_and_claim.queues IS NOT NULL
       AND (cardinality(jobs_complete_and_claim.queues) = 0
            OR array_position(jobs_complete_and_claim.queues, NULL) IS NOT NULL) THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'queues', 'must be NULL (all queues) or a non-empty array without NULLs');
    END IF;
    IF jobs_complete_and_claim.lease IS NULL OR jobs_complete_and_claim.lease <= interval '0'
       OR jobs_complete_and_claim.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_complete_and_claim', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    -- jobs_claim's own test for its fast path: with a paused or limited queue among those
    -- requested, the limited claim is called directly, told to skip the jobs_queues rows that
    -- others hold (jobs_claim would wait for them, and the completions with it).
    v_limited := jobs_complete_and_claim.max_jobs > 0 AND EXISTS (
        SELECT FROM jobs_queues q
        WHERE (jobs_complete_and_claim.queues IS NULL OR q.queue = ANY (jobs_complete_and_claim.queues))
          AND (q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
               OR q.fair OR q.ordered)
    );
    IF v_limited AND cardinality(jobs_complete_and_claim.ids) > 0 THEN
        -- The pairs' queues, read before completing (a completion may delete the row; a
        -- job's queue never changes), for the slots the completions hand over.
        SELECT coalesce(array_agg(j.id), '{}'), coalesce(array_agg(j.queue), '{}')
        INTO v_held_ids, v_held_queues
        FROM jobs j
        WHERE j.id = ANY (jobs_complete_and_claim.ids) AND j.state = 'running';
    END IF;

    -- Completions first: slots of limited queues they free are free for the claim.
    v_completed := ARRAY(
        SELECT d.done_id
        FROM jobs_complete_many(jobs_complete_and_claim.ids, jobs_complete_and_claim.attempts,
                                jobs_complete_and_claim.results) AS d(done_id)
        ORDER BY d.done_id
    );

    IF jobs_complete_and_claim.max_jobs > 0 AND NOT v_limited THEN
        -- Looked again: a requested queue may have been paused or limited while the
        -- completions ran (they can wait for a job row another session locks, or just take
        -- long), and jobs_claim, deciding afresh, would then wait for its jobs_queues row.
        -- Such a queue is claimed with the skipping claim too (no slot handover: the pairs'
        -- queues were not read).
        v_limited := EXISTS (
            SELECT FROM jobs_queues q
            WHERE (jobs_complete_and_claim.queues IS NULL OR q.queue = ANY (jobs_complete_and_claim.queues))
              AND (q.paused OR q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
                   OR q.fair OR q.ordered)
        );
    END IF;

    IF jobs_complete_and_claim.max_jobs > 0 THEN
        -- WITH ORDINALITY numbers the rows in the order the claim returns them.
        IF v_limited THEN
            SELECT coalesce(array_agg(f.queue), '{}'), coalesce(array_agg(f.n), '{}')
            INTO v_freed_queues, v_freed_slots
            FROM (SELECT h.queue, count(*)::integer AS n
                  FROM unnest(v_held_ids, v_held_queues) AS h(id, queue)
                  WHERE h.id = ANY (v_completed)
                  GROUP BY h.queue) f;
            RETURN QUERY
            SELECT CASE WHEN c.ord = 1 THEN v_completed END,
                   c.c_id, c.c_queue, c.c_kind, c.c_payload, c.c_attempt, c.c_max_attempts, c.c_priority,
                   c.c_run_at, c.c_lease_expires_at, c.c_created_at, c.c_meta, c.c_parent_results,
                   c.c_checkpoints
            FROM _jobs_claim_limited(jobs_complete_and_claim.worker, jobs_complete_and_claim.max_jobs,
                                     jobs_complete_and_claim.queues, jobs_complete_and_claim.lease,
                                     skip_locked_queues => true, freed_queues => v_freed_queues,
                                     freed_slots => v_freed_slots)
                 WITH ORDINALITY AS c(c_id, c_queue, c_kind, c_payload, c_attempt, c_max_attempts, c_priority,
                                      c_run_at, c_lease_expires_at, c_created_at, c_meta,
                                      c_parent_results, c_checkpoints, ord)
            ORDER BY c.ord;
        ELSE
            RETURN QUERY
            SELECT CASE WHEN c.ord = 1 THEN v_completed END,
                   c.c_id, c.c_queue, c.c_kind, c.c_payload, c.c_attempt, c.c_max_attempts, c.c_priority,
                   c.c_run_at, c.c_lease_expires_at, c.c_created_at, c.c_meta, c.c_parent_results,
                   c.c_checkpoints
            FROM jobs_claim(jobs_complete_and_claim.worker, jobs_complete_and_claim.max_jobs,
                            jobs_complete_and_claim.queues, jobs_complete_and_claim.lease)
                 WITH ORDINALITY AS c(c_id, c_queue, c_kind, c_payload, c_attempt, c_max_attempts, c_priority,
                                      c_run_at, c_lease_expires_at, c_created_at, c_meta,
                                      c_parent_results, c_checkpoints, ord)
            ORDER BY c.ord;
        END IF;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;

    -- Nothing claimed: one row that still reports the completions.
    RETURN QUERY
    SELECT v_completed, NULL::bigint, NULL::text, NULL::text, NULL::jsonb, NULL::integer, NULL::integer,
           NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::jsonb;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_complete_and_claim(worker text, ids bigint[], attempts integer[], max_jobs integer, queues text[], lease interval, results jsonb[]) IS 'skiplock: jobs_complete_many(ids, attempts, results) then jobs_claim(worker, max_jobs, queues, lease) in one call; completed (ids) on the first row, then the claimed jobs.';

CREATE FUNCTION skiplock.jobs_complete_many(ids bigint[], attempts integer[], results jsonb[] DEFAULT NULL::jsonb[]) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
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

COMMENT ON FUNCTION skiplock.jobs_complete_many(ids bigint[], attempts integer[], results jsonb[]) IS 'skiplock: jobs_complete for many (id, attempt) pairs, with optional results (deleted with done_retention 0); returns the ids completed.';

CREATE FUNCTION skiplock.jobs_cron_next(cron text, after timestamp with time zone, timezone text DEFAULT 'UTC'::text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET timezone_abbreviations TO 'Default'
    AS $$
#variable_conflict use_column
BEGIN
    RETURN _jobs_cron_next('jobs_cron_next', jobs_cron_next.cron, jobs_cron_next.after, jobs_cron_next.timezone);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_cron_next(cron text, after timestamp with time zone, timezone text) IS 'skiplock: the first instant after `after` at which a cron expression runs in a time zone.';

CREATE FUNCTION skiplock.jobs_delete_many(ids bigint[] DEFAULT NULL::bigint[], queue text DEFAULT NULL::text, kind text DEFAULT NULL::text, states skiplock.jobs_state[] DEFAULT '{done,dead,cancelled}'::skiplock.jobs_state[], max_jobs integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    PERFORM _jobs_check_bulk_args('jobs_delete_many', jobs_delete_many.states, '{done, dead, cancelled}',
                                  jobs_delete_many.max_jobs);

    IF jobs_delete_many.ids IS NULL AND NOT 'done' = ANY (jobs_delete_many.states) THEN
        -- Dead and cancelled jobs only: read from jobs_dead_cancelled, never walking the
        -- done ones.
        WITH doomed AS (
            SELECT l.id
            FROM jobs_dead_cancelled d
            -- One primary-key probe per listed job (the row lock keeps the subquery a probe).
            CROSS JOIN LATERAL (
                SELECT j.id
                FROM jobs j
                WHERE j.id = d.id
                  AND j.state IN ('dead', 'cancelled')
                  AND j.state = ANY (jobs_delete_many.states)
                  AND (jobs_delete_many.kind IS NULL OR j.kind = jobs_delete_many.kind)
                FOR UPDATE SKIP LOCKED
            ) AS l
            WHERE d.state = ANY (jobs_delete_many.states)
              AND (jobs_delete_many.queue IS NULL OR d.queue = jobs_delete_many.queue)
            LIMIT jobs_delete_many.max_jobs
        )
        DELETE FROM jobs j
        WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
    ELSE
        WITH doomed AS (
            SELECT j.id
            FROM jobs j
            WHERE j.state IN ('done', 'dead', 'cancelled')
              AND j.state = ANY (jobs_delete_many.states)
              AND (jobs_delete_many.ids IS NULL OR j.id = ANY (jobs_delete_many.ids))
              AND (jobs_delete_many.queue IS NULL OR j.queue = jobs_delete_many.queue)
              AND (jobs_delete_many.kind IS NULL OR j.kind = jobs_delete_many.kind)
            LIMIT jobs_delete_many.max_jobs
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM jobs j
        -- Through jobs_pkey; a join with doomed may be planned as a scan of the whole table.
        WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
    END IF;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_delete_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) IS 'skiplock: deletes up to max_jobs finished jobs matching the filters (default: done, dead, cancelled); skips locked rows; returns the count.';

CREATE FUNCTION skiplock.jobs_enqueue(kind text, payload jsonb DEFAULT '{}'::jsonb, queue text DEFAULT 'default'::text, run_at timestamp with time zone DEFAULT now(), priority integer DEFAULT 0, max_attempts integer DEFAULT 5, unique_key text DEFAULT NULL::text, concurrency_key text DEFAULT NULL::text, meta jsonb DEFAULT NULL::jsonb, notify boolean DEFAULT true, depends_on bigint[] DEFAULT NULL::bigint[], on_parent_failure text DEFAULT 'cancel'::text, notify_finished boolean DEFAULT false, on_duplicate text DEFAULT 'keep'::text, unique_for interval DEFAULT NULL::interval) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_id      bigint;
    v_parents bigint[];
    v_dup     record;
BEGIN
    IF jobs_enqueue.kind IS NULL OR jobs_enqueue.kind = '' OR octet_length(jobs_enqueue.kind) > 200 THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'kind', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_enqueue.payload IS NULL THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'payload', 'must not be NULL (use ''{}'' for no payload)');
    END IF;
    IF jobs_enqueue.queue IS NULL OR jobs_enqueue.queue = '' OR octet_length(jobs_enqueue.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_enqueue.run_at IS NULL OR NOT isfinite(jobs_enqueue.run_at) THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'run_at', 'must be a finite timestamp');
    END IF;
    IF jobs_enqueue.priority IS NULL THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'priority', 'must not be NULL');
    END IF;
    IF jobs_enqueue.max_attempts IS NULL OR jobs_enqueue.max_attempts < 1 THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'max_attempts', 'must be at least 1');
    END IF;
    IF jobs_enqueue.unique_key = '' OR octet_length(jobs_enqueue.unique_key) > 200 THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'unique_key', 'must be NULL or a non-empty string of at most 200 bytes');
    END IF;

    IF jobs_enqueue.concurrency_key = '' OR octet_length(jobs_enqueue.concurrency_key) > 200 THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'concurrency_key', 'must be NULL or a non-empty string of at most 200 bytes');
    END IF;
    IF jsonb_typeof(jobs_enqueue.meta) <> 'object' THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'meta', 'must be NULL or a JSON object');
    END IF;
    IF jobs_enqueue.notify IS NULL THEN
        PERFORM _jobs_invalid('jobs_enqueue', 'notify', 'must not be NULL');
    END IF;
    -- The workflow arguments, looked at only when one is not its default (one test for the
    -- usual enqueue).
    IF jobs_enqueue.depends_on IS NOT NULL OR jobs_enqueue.notify_finished IS DISTINCT FROM false
       OR jobs_enqueue.on_parent_failure IS DISTINCT FROM 'cancel' THEN
        IF jobs_enqueue.notify_finished IS NULL THEN
            PERFORM _jobs_invalid('jobs_enqueue', 'notify_finished', 'must not be NULL');
        END IF;
        IF jobs_enqueue.on_parent_failure IS NULL OR jobs_enqueue.on_parent_failure NOT IN ('cancel', 'run') THEN
            PERFORM _jobs_invalid('jobs_enqueue', 'on_parent_failure', 'must be ''cancel'' or ''run''');
        END IF;
        IF cardinality(jobs_enqueue.depends_on) > 0 THEN
            IF array_ndims(jobs_enqueue.depends_on) > 1 THEN
                PERFORM _jobs_invalid('jobs_enqueue', 'depends_on', 'must be a one-dimensional array');
            END IF;
            IF array_position(jobs_enqueue.depends_on, NULL) IS NOT NULL THEN
                PERFORM _jobs_invalid('jobs_enqueue', 'depends_on', 'must not contain NULL');
            END IF;
            IF cardinality(jobs_enqueue.depends_on) > 10000 THEN
                PERFORM _jobs_invalid('jobs_enqueue', 'depends_on', 'must hold at most 10000 ids');
            END IF;
            v_parents := ARRAY(SELECT DISTINCT u FROM unnest(jobs_enqueue.depends_on) AS u ORDER BY u);
        END IF;
    END IF;

    -- The duplicate arguments, looked at only when one is not its default.
    IF jobs_enqueue.on_duplicate IS DISTINCT FROM 'keep' OR jobs_enqueue.unique_for IS NOT NULL THEN
        IF jobs_enqueue.on_duplicate IS NULL OR jobs_enqueue.on_duplicate NOT IN ('keep', 'replace') THEN
            PERFORM _jobs_invalid('jobs_enqueue', 'on_duplicate', 'must be ''keep'' or ''replace''');
        END IF;
        IF jobs_enqueue.unique_for <= interval '0' OR jobs_enqueue.unique_for > interval '100 years' THEN
            PERFORM _jobs_invalid('jobs_enqueue', 'unique_for', 'must be NULL or a positive interval of at most 100 years');
        END IF;
        IF jobs_enqueue.unique_key IS NULL AND jobs_enqueue.on_duplicate = 'replace' THEN
            PERFORM _jobs_invalid('jobs_enqueue', 'on_duplicate', 'must be ''keep'' when unique_key is NULL (a job without a key has no duplicate)');
        END IF;
        IF jobs_enqueue.unique_key IS NULL AND jobs_enqueue.unique_for IS NOT NULL THEN
            PERFORM _jobs_invalid('jobs_enqueue', 'unique_for', 'must be NULL when unique_key is NULL (it is how long the key stays taken)');
        END IF;
    END IF;

    -- With a key a live job holds, nothing below looks at the parents: their ids are
    -- checked here, so that an unknown one is refused whatever the key.
    IF jobs_enqueue.unique_key IS NOT NULL AND v_parents IS NOT NULL THEN
        SELECT u INTO v_id FROM unnest(v_parents) AS u
        WHERE NOT EXISTS (SELECT FROM jobs p WHERE p.id = u)
        ORDER BY u LIMIT 1;
        IF FOUND THEN
            PERFORM _jobs_invalid('jobs_enqueue', 'depends_on',
                format('names no job with id %s (on this database: a job and its parents live on one shard)', v_id));
        END IF;
    END IF;

    IF jobs_enqueue.unique_key IS NOT NULL THEN
        -- The key first: its row in jobs_unique_keys is the lock that makes concurrent
        -- callers with the same key take turns. When it is taken, _jobs_enqueue_duplicate
        -- says which job stands for this one (kept, replaced in place, or still in its
        -- unique_for period), or gives the key to the id drawn here.
        v_id := nextval('jobs_id_seq');
        INSERT INTO jobs_unique_keys (queue, unique_key, id)
        VALUES (jobs_enqueue.queue, jobs_enqueue.unique_key, v_id)
        ON CONFLICT (queue, unique_key) DO NOTHING;
        IF NOT FOUND THEN
            SELECT d.id, d.not_before INTO v_dup
            FROM _jobs_enqueue_duplicate(jobs_enqueue.queue, jobs_enqueue.unique_key, jobs_enqueue.on_duplicate, v_id,
                                         jobs_enqueue.payload, jobs_enqueue.run_at, jobs_enqueue.priority,
                                         jobs_enqueue.max_attempts, jobs_enqueue.notify, jobs_enqueue.kind,
                                         'jobs_enqueue', 'kind') AS d;
            IF v_dup.id <> v_id THEN
                RETURN v_dup.id;
            END IF;
            jobs_enqueue.run_at := greatest(jobs_enqueue.run_at, v_dup.not_before);
        END IF;
    END IF;

    IF v_parents IS NOT NULL THEN
        RETURN _jobs_enqueue_child(jobs_enqueue.kind, jobs_enqueue.payload, jobs_enqueue.queue, jobs_enqueue.run_at,
                                   jobs_enqueue.priority, jobs_enqueue.max_attempts, jobs_enqueue.unique_key,
                                   jobs_enqueue.concurrency_key, jobs_enqueue.meta, jobs_enqueue.notify, v_parents,
                                   jobs_enqueue.on_parent_failure, jobs_enqueue.notify_finished, v_id, NULL, NULL,
                                   jobs_enqueue.unique_for);
    END IF;

    -- The job, and its row in jobs_queued (what claims find it by).
    WITH inserted AS (
        INSERT INTO jobs (id, queue, kind, payload, run_at, priority, max_attempts, unique_key, concurrency_key, meta,
                          notify_finished, unique_for)
        VALUES (coalesce(v_id, nextval('jobs_id_seq')), jobs_enqueue.queue, jobs_enqueue.kind, jobs_enqueue.payload,
                jobs_enqueue.run_at, jobs_enqueue.priority, jobs_enqueue.max_attempts, jobs_enqueue.unique_key,
                jobs_enqueue.concurrency_key, jobs_enqueue.meta, nullif(jobs_enqueue.notify_finished, false),
                jobs_enqueue.unique_for)
        RETURNING jobs.id, jobs.queue, jobs.priority, jobs.run_at, jobs.concurrency_key
    )
    INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
    SELECT i.queue, i.priority, i.run_at, i.id, i.concurrency_key FROM inserted i
    RETURNING jobs_queued.id INTO v_id;

    IF jobs_enqueue.notify AND jobs_enqueue.run_at <= now() THEN
        PERFORM pg_notify('jobs_ready', jobs_enqueue.queue);
    END IF;
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_enqueue(kind text, payload jsonb, queue text, run_at timestamp with time zone, priority integer, max_attempts integer, unique_key text, concurrency_key text, meta jsonb, notify boolean, depends_on bigint[], on_parent_failure text, notify_finished boolean, on_duplicate text, unique_for interval) IS 'skiplock: adds one job (or returns the live job with the same queue and unique_key) and wakes workers when it is ready now.';

CREATE FUNCTION skiplock.jobs_enqueue_many(kinds text[], payloads jsonb[] DEFAULT NULL::jsonb[], queues text[] DEFAULT NULL::text[], run_ats timestamp with time zone[] DEFAULT NULL::timestamp with time zone[], priorities integer[] DEFAULT NULL::integer[], max_attempts integer[] DEFAULT NULL::integer[], unique_keys text[] DEFAULT NULL::text[], concurrency_keys text[] DEFAULT NULL::text[], metas jsonb[] DEFAULT NULL::jsonb[], notify boolean DEFAULT true, on_duplicates text[] DEFAULT NULL::text[], unique_fors interval[] DEFAULT NULL::interval[]) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_n            integer := cardinality(jobs_enqueue_many.kinds);
    v_kinds        text[];
    v_payloads     jsonb[];
    v_queues       text[];
    v_run_ats      timestamptz[];
    v_priorities   integer[];
    v_max_attempts integer[];
    v_unique_keys  text[];
    v_conc_keys    text[];
    v_metas        jsonb[];
    v_on_dups      text[];
    v_unique_fors  interval[];
    v_dup          record;
    v_param        text;
    v_bad          record;
    v_ids          bigint[];
    v_drawn        bigint[];
    v_inserted     bigint[];
    v_missing      record;
    v_id           bigint;
BEGIN
    IF v_n IS NULL THEN
        PERFORM _jobs_invalid('jobs_enqueue_many', 'kinds', 'must not be NULL');
    END IF;
    IF jobs_enqueue_many.notify IS NULL THEN
        PERFORM _jobs_invalid('jobs_enqueue_many', 'notify', 'must not be NULL');
    END IF;
    IF v_n > 100000 THEN
        PERFORM _jobs_invalid('jobs_enqueue_many', 'kinds', 'must have at most 100000 elements');
    END IF;
    SELECT p.param INTO v_param
    FROM (VALUES ('kinds', array_ndims(jobs_enqueue_many.kinds)),
                 ('payloads', array_ndims(jobs_enqueue_many.payloads)),
                 ('queues', array_ndims(jobs_enqueue_many.queues)),
                 ('run_ats', array_ndims(jobs_enqueue_many.run_ats)),
                 ('priorities', array_ndims(jobs_enqueue_many.priorities)),
                 ('max_attempts', array_ndims(jobs_enqueue_many.max_attempts)),
                 ('unique_keys', array_ndims(jobs_enqueue_many.unique_keys)),
                 ('concurrency_keys', array_ndims(jobs_enqueue_many.concurrency_keys)),
                 ('metas', array_ndims(jobs_enqueue_many.metas)),
                 ('on_duplicates', array_ndims(jobs_enqueue_many.on_duplicates)),
                 ('unique_fors', array_ndims(jobs_enqueue_many.unique_fors))) AS p(param, ndims)
    WHERE p.ndims > 1
    LIMIT 1;
    IF v_param IS NOT NULL THEN
        PERFORM _jobs_invalid('jobs_enqueue_many', v_param, 'must be a one-dimensional array');
    END IF;

    SELECT p.param INTO v_param
    FROM (VALUES ('payloads', cardinality(jobs_enqueue_many.payloads)),
                 ('queues', cardinality(jobs_enqueue_many.queues)),
                 ('run_ats', cardinality(jobs_enqueue_many.run_ats)),
                 ('priorities', cardinality(jobs_enqueue_many.priorities)),
                 ('max_attempts', cardinality(jobs_enqueue_many.max_attempts)),
                 ('unique_keys', cardinality(jobs_enqueue_many.unique_keys)),
                 ('concurrency_keys', cardinality(jobs_enqueue_many.concurrency_keys)),
                 ('metas', cardinality(jobs_enqueue_many.metas)),
                 ('on_duplicates', cardinality(jobs_enqueue_many.on_duplicates)),
                 ('unique_fors', cardinality(jobs_enqueue_many.unique_fors))) AS p(param, n)
    WHERE p.n IS NOT NULL AND p.n <> v_n
    LIMIT 1;
    IF v_param IS NOT NULL THEN
        PERFORM _jobs_invalid('jobs_enqueue_many', v_param,
                              format('must be NULL or have as many elements as kinds (%s)', v_n));
    END IF;

    IF v_n = 0 THEN
        RETURN;
    END IF;

    -- An array passed as NULL means the default for every job; a NULL element inside an
    -- array that was passed is an error, as it is for jobs_enqueue. Arrays are copied with
    -- rebased so that element i is at index i whatever lower bound the caller's array had
    -- ('[0:1]={a,b}' is legal SQL).
    v_kinds        := CASE WHEN array_lower(jobs_enqueue_many.kinds, 1) = 1 THEN jobs_enqueue_many.kinds
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.kinds)) END;
    v_payloads     := CASE WHEN jobs_enqueue_many.payloads IS NULL THEN array_fill('{}'::jsonb, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.payloads, 1) = 1 THEN jobs_enqueue_many.payloads
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.payloads)) END;
    v_queues       := CASE WHEN jobs_enqueue_many.queues IS NULL THEN array_fill('default'::text, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.queues, 1) = 1 THEN jobs_enqueue_many.queues
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.queues)) END;
    v_run_ats      := CASE WHEN jobs_enqueue_many.run_ats IS NULL THEN array_fill(now(), ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.run_ats, 1) = 1 THEN jobs_enqueue_many.run_ats
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.run_ats)) END;
    v_priorities   := CASE WHEN jobs_enqueue_many.priorities IS NULL THEN array_fill(0, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.priorities, 1) = 1 THEN jobs_enqueue_many.priorities
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.priorities)) END;
    v_max_attempts := CASE WHEN jobs_enqueue_many.max_attempts IS NULL THEN array_fill(5, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.max_attempts, 1) = 1 THEN jobs_enqueue_many.max_attempts
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.max_attempts)) END;
    v_unique_keys  := CASE WHEN jobs_enqueue_many.unique_keys IS NULL THEN array_fill(NULL::text, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.unique_keys, 1) = 1 THEN jobs_enqueue_many.unique_keys
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.unique_keys)) END;
    v_conc_keys    := CASE WHEN jobs_enqueue_many.concurrency_keys IS NULL THEN array_fill(NULL::text, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.concurrency_keys, 1) = 1 THEN jobs_enqueue_many.concurrency_keys
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.concurrency_keys)) END;
    v_metas        := CASE WHEN jobs_enqueue_many.metas IS NULL THEN array_fill(NULL::jsonb, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.metas, 1) = 1 THEN jobs_enqueue_many.metas
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.metas)) END;
    v_on_dups      := CASE WHEN jobs_enqueue_many.on_duplicates IS NULL THEN array_fill('keep'::text, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.on_duplicates, 1) = 1 THEN jobs_enqueue_many.on_duplicates
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.on_duplicates)) END;
    v_unique_fors  := CASE WHEN jobs_enqueue_many.unique_fors IS NULL THEN array_fill(NULL::interval, ARRAY[v_n])
                       WHEN array_lower(jobs_enqueue_many.unique_fors, 1) = 1 THEN jobs_enqueue_many.unique_fors
                       ELSE ARRAY(SELECT unnest(jobs_enqueue_many.unique_fors)) END;

    SELECT * INTO v_bad
    FROM unnest(v_kinds, v_payloads, v_queues, v_run_ats, v_priorities, v_max_attempts,
                v_unique_keys, v_conc_keys, v_metas, v_on_dups, v_unique_fors)
         WITH ORDINALITY AS t(kind, payload, queue, run_at, priority, max_attempts, unique_key, concurrency_key,
                              meta, on_duplicate, unique_for, ord)
    WHERE t.kind IS NULL OR t.kind = '' OR octet_length(t.kind) > 200
       OR t.payload IS NULL
       OR t.queue IS NULL OR t.queue = '' OR octet_length(t.queue) > 200
       OR t.run_at IS NULL OR NOT isfinite(t.run_at)
       OR t.priority IS NULL
       OR t.max_attempts IS NULL OR t.max_attempts < 1
       OR t.unique_key = '' OR octet_length(t.unique_key) > 200
       OR t.concurrency_key = '' OR octet_length(t.concurrency_key) > 200
       OR jsonb_typeof(t.meta) <> 'object'
       OR t.on_duplicate IS NULL OR t.on_duplicate NOT IN ('keep', 'replace')
       OR t.unique_for <= interval '0' OR t.unique_for > interval '100 years'
       OR (t.unique_key IS NULL AND (t.on_duplicate = 'replace' OR t.unique_for IS NOT NULL))
    ORDER BY t.ord
    LIMIT 1;
    IF FOUND THEN
        IF v_bad.kind IS NULL OR v_bad.kind = '' OR octet_length(v_bad.kind) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('kinds[%s]', v_bad.ord),
                                  'must be a non-empty string of at most 200 bytes');
        ELSIF v_bad.payload IS NULL THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('payloads[%s]', v_bad.ord),
                                  'must not be NULL (use ''{}'' for no payload)');
        ELSIF v_bad.queue IS NULL OR v_bad.queue = '' OR octet_length(v_bad.queue) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('queues[%s]', v_bad.ord),
                                  'must be a non-empty string of at most 200 bytes');
        ELSIF v_bad.run_at IS NULL OR NOT isfinite(v_bad.run_at) THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('run_ats[%s]', v_bad.ord), 'must be a finite timestamp');
        ELSIF v_bad.priority IS NULL THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('priorities[%s]', v_bad.ord), 'must not be NULL');
        ELSIF v_bad.max_attempts IS NULL OR v_bad.max_attempts < 1 THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('max_attempts[%s]', v_bad.ord), 'must be at least 1');
        ELSIF v_bad.unique_key = '' OR octet_length(v_bad.unique_key) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('unique_keys[%s]', v_bad.ord),
                                  'must be NULL or a non-empty string of at most 200 bytes');
        ELSIF v_bad.concurrency_key = '' OR octet_length(v_bad.concurrency_key) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('concurrency_keys[%s]', v_bad.ord),
                                  'must be NULL or a non-empty string of at most 200 bytes');
        ELSIF jsonb_typeof(v_bad.meta) <> 'object' THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('metas[%s]', v_bad.ord),
                                  'must be NULL or a JSON object');
        ELSIF v_bad.on_duplicate IS NULL OR v_bad.on_duplicate NOT IN ('keep', 'replace') THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('on_duplicates[%s]', v_bad.ord),
                                  'must be ''keep'' or ''replace''');
        ELSIF v_bad.unique_for <= interval '0' OR v_bad.unique_for > interval '100 years' THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('unique_fors[%s]', v_bad.ord),
                                  'must be NULL or a positive interval of at most 100 years');
        ELSIF v_bad.on_duplicate = 'replace' THEN
            PERFORM _jobs_invalid('jobs_enqueue_many', format('on_duplicates[%s]', v_bad.ord),
                                  'must be ''keep'' when unique_keys[' || v_bad.ord || '] is NULL (a job without a key has no duplicate)');
        ELSE
            PERFORM _jobs_invalid('jobs_enqueue_many', format('unique_fors[%s]', v_bad.ord),
                                  'must be NULL when unique_keys[' || v_bad.ord || '] is NULL (it is how long the key stays taken)');
        END IF;
    END IF;

    IF jobs_enqueue_many.unique_keys IS NULL THEN
        -- No key can conflict: one plain INSERT. Identity values are drawn in insertion
        -- order, which ORDER BY t.ord fixes to input order.
        RETURN QUERY
        WITH inserted AS (
            INSERT INTO jobs (queue, kind, payload, run_at, priority, max_attempts, concurrency_key, meta)
            SELECT t.queue, t.kind, t.payload, t.run_at, t.priority, t.max_attempts, t.concurrency_key, t.meta
            FROM unnest(v_kinds, v_payloads, v_queues, v_run_ats, v_priorities,
                        v_max_attempts, v_conc_keys, v_metas) WITH ORDINALITY AS t(kind, payload, queue, run_at,
                                                                                   priority, max_attempts,
                                                                                   concurrency_key, meta, ord)
            ORDER BY t.ord
            RETURNING jobs.id, jobs.queue, jobs.priority, jobs.run_at, jobs.concurrency_key
        ), queued AS (
            INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
            SELECT i.queue, i.priority, i.run_at, i.id, i.concurrency_key FROM inserted i
        )
        SELECT i.id FROM inserted i ORDER BY i.id;
    ELSE
        -- Ids are drawn up front so that each input keeps its id whether or not its insert
        -- was skipped by ON CONFLICT; skipped inputs then get the id of the key's live job.
        v_ids := ARRAY(SELECT nextval('jobs_id_seq') FROM generate_series(1, v_n));
        v_drawn := v_ids;

        -- The keys first, in key order, not input order (each input keeps the id drawn for
        -- it): two batches waiting on each other's uncommitted keys then always wait in the
        -- same order, so they cannot deadlock. t.ord keeps the earlier of two equal keys first.
        WITH taken AS (
            INSERT INTO jobs_unique_keys (queue, unique_key, id)
            SELECT t.queue, t.unique_key, v_ids[t.ord]
            FROM unnest(v_queues, v_unique_keys) WITH ORDINALITY AS t(queue, unique_key, ord)
            WHERE t.unique_key IS NOT NULL
            ORDER BY t.queue, t.unique_key, t.ord
            ON CONFLICT (queue, unique_key) DO NOTHING
            RETURNING id
        )
        SELECT coalesce(array_agg(k.id), '{}') INTO v_inserted FROM taken k;

        -- The jobs without a key and those whose key was free.
        WITH inserted AS (
            INSERT INTO jobs (id, queue, kind, payload, run_at, priority, max_attempts, unique_key, concurrency_key,
                              meta, unique_for)
            SELECT v_ids[t.ord], t.queue, t.kind, t.payload, t.run_at, t.priority, t.max_attempts, t.unique_key,
                   t.concurrency_key, t.meta, t.unique_for
            FROM unnest(v_kinds, v_payloads, v_queues, v_run_ats, v_priorities,
                        v_max_attempts, v_unique_keys, v_conc_keys, v_metas, v_unique_fors) WITH ORDINALITY
                 AS t(kind, payload, queue, run_at, priority, max_attempts, unique_key, concurrency_key, meta,
                      unique_for, ord)
            WHERE t.unique_key IS NULL OR v_ids[t.ord] = ANY (v_inserted)
            ORDER BY t.ord
            RETURNING jobs.id, jobs.queue, jobs.priority, jobs.run_at, jobs.concurrency_key
        )
        INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
        SELECT i.queue, i.priority, i.run_at, i.id, i.concurrency_key FROM inserted i;

        FOR v_missing IN
            SELECT t.ord
            FROM unnest(v_ids, v_unique_keys) WITH ORDINALITY AS t(id, unique_key, ord)
            WHERE t.unique_key IS NOT NULL AND NOT t.id = ANY (v_inserted)
            -- In the order of the ids of the jobs holding the keys: a replace locks the key's
            -- job, and two calls naming the same keys in different input orders, or a
            -- completion batch (which locks its jobs in id order), would otherwise wait on
            -- each other in opposite orders and deadlock. Elements of one key still act in
            -- input order (the last replace of a key wins).
            ORDER BY (SELECT k.id FROM jobs_unique_keys k
                      WHERE k.queue = v_queues[t.ord] AND k.unique_key = t.unique_key),
                     v_queues[t.ord], t.unique_key, t.ord
        LOOP
            -- As in jobs_enqueue: kept, replaced in place (also a job an earlier element of
            -- this call inserted: the later element's fields win), still in its unique_for
            -- period, or the key given to the id drawn for this input.
            SELECT d.id, d.not_before INTO v_dup
            FROM _jobs_enqueue_duplicate(v_queues[v_missing.ord], v_unique_keys[v_missing.ord], v_on_dups[v_missing.ord],
                                         v_ids[v_missing.ord], v_payloads[v_missing.ord], v_run_ats[v_missing.ord],
                                         v_priorities[v_missing.ord], v_max_attempts[v_missing.ord],
                                         jobs_enqueue_many.notify, v_kinds[v_missing.ord], 'jobs_enqueue_many',
                                         format('kinds[%s]', v_missing.ord)) AS d;
            v_id := v_dup.id;
            IF v_id = v_ids[v_missing.ord] THEN
                v_run_ats[v_missing.ord] := greatest(v_run_ats[v_missing.ord], v_dup.not_before);
                INSERT INTO jobs (id, queue, kind, payload, run_at, priority, max_attempts, unique_key,
                                  concurrency_key, meta, unique_for)
                VALUES (v_id, v_queues[v_missing.ord], v_kinds[v_missing.ord],
                        v_payloads[v_missing.ord], v_run_ats[v_missing.ord], v_priorities[v_missing.ord],
                        v_max_attempts[v_missing.ord], v_unique_keys[v_missing.ord], v_conc_keys[v_missing.ord],
                        v_metas[v_missing.ord], v_unique_fors[v_missing.ord]);
                INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
                VALUES (v_queues[v_missing.ord], v_priorities[v_missing.ord], v_run_ats[v_missing.ord], v_id,
                        v_conc_keys[v_missing.ord]);
            END IF;
            v_ids[v_missing.ord] := v_id;
        END LOOP;

        RETURN QUERY SELECT t.id FROM unnest(v_ids) WITH ORDINALITY AS t(id, ord) ORDER BY t.ord;
    END IF;

    -- Wake workers only for jobs this call inserted: an input that got an existing job's id
    -- (v_ids[i] no longer the id drawn for it) added nothing to claim. Without unique_keys
    -- both arrays are NULL and every input counts.
    PERFORM pg_notify('jobs_ready', q.queue)
    FROM (SELECT DISTINCT t.queue
          FROM unnest(v_queues, v_run_ats, v_ids, v_drawn) AS t(queue, run_at, id, drawn)
          WHERE jobs_enqueue_many.notify
            AND t.run_at <= now()
            AND t.id IS NOT DISTINCT FROM t.drawn) AS q;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_enqueue_many(kinds text[], payloads jsonb[], queues text[], run_ats timestamp with time zone[], priorities integer[], max_attempts integer[], unique_keys text[], concurrency_keys text[], metas jsonb[], notify boolean, on_duplicates text[], unique_fors interval[]) IS 'skiplock: adds many jobs in one call (arrays indexed alike; NULL array = default for all) and returns their ids in input order.';

CREATE FUNCTION skiplock.jobs_enqueue_workflow(steps jsonb) RETURNS TABLE(name text, id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_n       integer;
    v_index   jsonb;
    v_step    jsonb;
    v_name    text;
    v_dep     jsonb;
    v_key     text;
    v_parent  integer;
    v_ep      integer[] := '{}';
    v_ec      integer[] := '{}';
    v_names   text[] := '{}';
    v_depth   integer[];
    v_pending integer[];
    v_ready   integer[];
    v_head    integer;
    v_child   integer;
    v_children   jsonb;
    v_parents_of jsonb;
    v_ids     bigint[];
    v_wf      bigint;
    v_parents bigint[];
    v_i       integer;
    v_id      bigint;
    v_kind    text;
    v_queue   text;
    v_payload jsonb;
    v_prio    integer;
    v_max     integer;
    v_run_at  timestamptz;
    v_ckey    text;
    v_meta    jsonb;
    v_policy  text;
    v_nf      boolean;
BEGIN
    IF jsonb_typeof(jobs_enqueue_workflow.steps) IS DISTINCT FROM 'array'
       OR jsonb_array_length(jobs_enqueue_workflow.steps) = 0 THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', 'must be a non-empty JSON array of step objects');
    END IF;
    v_n := jsonb_array_length(jobs_enqueue_workflow.steps);
    IF v_n > 10000 THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', 'must hold at most 10000 steps');
    END IF;

    -- Names.
    FOR v_i IN 1 .. v_n LOOP
        v_step := jobs_enqueue_workflow.steps -> (v_i - 1);
        IF jsonb_typeof(v_step) IS DISTINCT FROM 'object' THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('element %s is not an object', v_i - 1));
        END IF;
        IF jsonb_typeof(v_step -> 'name') IS DISTINCT FROM 'string' OR v_step ->> 'name' = ''
           OR octet_length(v_step ->> 'name') > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('element %s has no name (a non-empty string of at most 200 bytes)', v_i - 1));
        END IF;
        v_name := v_step ->> 'name';
        -- A misspelt field would otherwise be a default silently taken.
        SELECT k INTO v_key FROM jsonb_object_keys(v_step) AS k
        WHERE k NOT IN ('name', 'kind', 'payload', 'queue', 'priority', 'max_attempts', 'run_at', 'concurrency_key',
                        'meta', 'depends_on', 'on_parent_failure', 'notify_finished')
        LIMIT 1;
        IF FOUND THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s has an unknown field %s', to_jsonb(v_name), to_jsonb(v_key)));
        END IF;
        v_names[v_i] := v_name;
    END LOOP;
    SELECT x.nm INTO v_name FROM unnest(v_names) AS x(nm) GROUP BY x.nm HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('has two steps named %s', to_jsonb(v_name)));
    END IF;
    -- Built once: appending to a jsonb value copies it, which made each step cost as many.
    v_index := (SELECT jsonb_object_agg(x.nm, x.i) FROM unnest(v_names) WITH ORDINALITY AS x(nm, i));

    -- Edges (parent index, child index).
    FOR v_i IN 1 .. v_n LOOP
        v_step := jobs_enqueue_workflow.steps -> (v_i - 1);
        IF v_step ? 'depends_on' AND jsonb_typeof(v_step -> 'depends_on') <> 'null' THEN
            IF jsonb_typeof(v_step -> 'depends_on') <> 'array' THEN
                PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                    format('step %s: depends_on must be an array of step names', to_jsonb(v_step ->> 'name')));
            END IF;
            FOR v_dep IN SELECT e FROM jsonb_array_elements(v_step -> 'depends_on') AS e LOOP
                IF jsonb_typeof(v_dep) <> 'string' OR NOT v_index ? (v_dep #>> '{}') THEN
                    PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                        format('step %s depends on unknown step %s', to_jsonb(v_step ->> 'name'), v_dep));
                END IF;
                v_parent := (v_index ->> (v_dep #>> '{}'))::integer;
                v_ep[cardinality(v_ep) + 1] := v_parent;
                v_ec[cardinality(v_ec) + 1] := v_i;
            END LOOP;
        END IF;
    END LOOP;

    -- Depth of each step (the longest path from a step without parents), in topological
    -- order (Kahn): a step is taken once all its parents were; steps never taken form a
    -- cycle. Linear in steps and dependencies.
    v_children := (SELECT jsonb_object_agg(g.p, g.cs)
                   FROM (SELECT v_ep[e] AS p, jsonb_agg(v_ec[e]) AS cs
                         FROM generate_subscripts(v_ep, 1) AS e GROUP BY 1) AS g);
    v_pending := array_fill(0, ARRAY[v_n]);
    FOR v_i IN SELECT e FROM generate_subscripts(v_ec, 1) AS e LOOP
        v_pending[v_ec[v_i]] := v_pending[v_ec[v_i]] + 1;
    END LOOP;
    v_depth := array_fill(0, ARRAY[v_n]);
    v_ready := ARRAY(SELECT s.i FROM generate_series(1, v_n) AS s(i) WHERE v_pending[s.i] = 0 ORDER BY s.i);
    v_head := 1;
    WHILE v_head <= cardinality(v_ready) LOOP
        v_i := v_ready[v_head];
        v_head := v_head + 1;
        FOR v_child IN SELECT c::integer FROM jsonb_array_elements_text(v_children -> v_i::text) AS c LOOP
            v_depth[v_child] := greatest(v_depth[v_child], v_depth[v_i] + 1);
            v_pending[v_child] := v_pending[v_child] - 1;
            IF v_pending[v_child] = 0 THEN
                v_ready[cardinality(v_ready) + 1] := v_child;
            END IF;
        END LOOP;
    END LOOP;
    IF cardinality(v_ready) < v_n THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', 'form a cycle (a step depends on itself through depends_on)');
    END IF;
    -- Each step's parents, by index, for the inserts below.
    v_parents_of := (SELECT jsonb_object_agg(g.c, g.ps)
                     FROM (SELECT v_ec[e] AS c, jsonb_agg(v_ep[e]) AS ps
                           FROM generate_subscripts(v_ec, 1) AS e GROUP BY 1) AS g);

    -- Parents first; ids in that order.
    v_ids := array_fill(NULL::bigint, ARRAY[v_n]);
    FOR v_i IN SELECT s.i FROM generate_series(1, v_n) AS s(i) ORDER BY v_depth[s.i], s.i LOOP
        v_step := jobs_enqueue_workflow.steps -> (v_i - 1);
        v_name := v_step ->> 'name';
        -- Each field's JSON type first: ->> would read 5 as the queue "5".
        SELECT k INTO v_key
        FROM (VALUES ('kind', 'string'), ('queue', 'string'), ('priority', 'number'), ('max_attempts', 'number'),
                     ('run_at', 'string'), ('concurrency_key', 'string'), ('on_parent_failure', 'string'),
                     ('notify_finished', 'boolean')) AS f(k, t)
        WHERE v_step ? f.k AND jsonb_typeof(v_step -> f.k) NOT IN (f.t, 'null')
        LIMIT 1;
        IF FOUND THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: %s must be a JSON %s', to_jsonb(v_name), v_key,
                       CASE v_key WHEN 'priority' THEN 'integer' WHEN 'max_attempts' THEN 'integer'
                                  WHEN 'notify_finished' THEN 'boolean' ELSE 'string' END));
        END IF;
        BEGIN
            v_kind := v_step ->> 'kind';
            v_payload := coalesce(v_step -> 'payload', '{}');
            v_queue := coalesce(v_step ->> 'queue', 'default');
            v_prio := coalesce((v_step ->> 'priority')::integer, 0);
            v_max := coalesce((v_step ->> 'max_attempts')::integer, 5);
            v_run_at := coalesce((v_step ->> 'run_at')::timestamptz, now());
            v_ckey := v_step ->> 'concurrency_key';
            v_meta := v_step -> 'meta';
            v_policy := coalesce(v_step ->> 'on_parent_failure', 'cancel');
            v_nf := coalesce((v_step ->> 'notify_finished')::boolean, false);
        EXCEPTION WHEN data_exception THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: %s', to_jsonb(v_name), SQLERRM));
        END;
        IF jsonb_typeof(v_step -> 'kind') IS DISTINCT FROM 'string' OR v_kind = '' OR octet_length(v_kind) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: kind must be a non-empty string of at most 200 bytes', to_jsonb(v_name)));
        END IF;
        IF jsonb_typeof(v_payload) = 'null' THEN
            v_payload := '{}';
        END IF;
        IF v_queue = '' OR octet_length(v_queue) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: queue must be a non-empty string of at most 200 bytes', to_jsonb(v_name)));
        END IF;
        IF v_max < 1 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('step %s: max_attempts must be at least 1', to_jsonb(v_name)));
        END IF;
        IF NOT isfinite(v_run_at) THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('step %s: run_at must be a finite timestamp', to_jsonb(v_name)));
        END IF;
        IF v_ckey = '' OR octet_length(v_ckey) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: concurrency_key must be a non-empty string of at most 200 bytes', to_jsonb(v_name)));
        END IF;
        IF jsonb_typeof(v_meta) = 'null' THEN
            v_meta := NULL;
        ELSIF jsonb_typeof(v_meta) <> 'object' THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('step %s: meta must be an object', to_jsonb(v_name)));
        END IF;
        IF v_policy NOT IN ('cancel', 'run') THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: on_parent_failure must be "cancel" or "run"', to_jsonb(v_name)));
        END IF;

        v_parents := ARRAY(SELECT DISTINCT v_ids[x::integer]
                           FROM jsonb_array_elements_text(v_parents_of -> v_i::text) AS x ORDER BY 1);
        IF v_wf IS NULL THEN
            v_wf := nextval('jobs_id_seq');
            v_id := v_wf;
        ELSE
            v_id := nextval('jobs_id_seq');
        END IF;
        IF cardinality(v_parents) = 0 THEN
            INSERT INTO jobs (id, queue, kind, payload, run_at, priority, max_attempts, concurrency_key, meta,
                              notify_finished, workflow_id, workflow_step)
            VALUES (v_id, v_queue, v_kind, v_payload, v_run_at, v_prio, v_max, v_ckey, v_meta,
                    nullif(v_nf, false), v_wf, v_name);
            INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
            VALUES (v_queue, v_prio, v_run_at, v_id, v_ckey);
            IF v_run_at <= now() THEN
                PERFORM pg_notify('jobs_ready', v_queue);
            END IF;
        ELSE
            PERFORM _jobs_enqueue_child(v_kind, v_payload, v_queue, v_run_at, v_prio, v_max, NULL, v_ckey, v_meta,
                                        true, v_parents, v_policy, v_nf, v_id, v_wf, v_name);
        END IF;
        v_ids[v_i] := v_id;
        name := v_name;
        id := v_id;
        RETURN NEXT;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_enqueue_workflow(steps jsonb) IS 'skiplock: adds a graph of jobs with dependencies by step name, all or nothing; returns each step''s name and id.';

CREATE FUNCTION skiplock.jobs_fail(id bigint, attempt integer, error text, retry_at timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS skiplock.jobs_state
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_state  jobs_state;
    v_queue  text;
    v_run_at timestamptz;
    v_claim  bigint;
    v_superseded boolean;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_fail.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_fail', 'id', 'must not be NULL');
    END IF;
    IF jobs_fail.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_fail', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_fail.error IS NULL THEN
        PERFORM _jobs_invalid('jobs_fail', 'error', 'must not be NULL');
    END IF;
    IF NOT isfinite(jobs_fail.retry_at) THEN
        PERFORM _jobs_invalid('jobs_fail', 'retry_at', 'must be NULL or a finite timestamp');
    END IF;

    UPDATE jobs j
    SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'queued' END::jobs_state,
        run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at
                      ELSE coalesce(jobs_fail.retry_at, now() + jobs_backoff(j.attempts)) END,
        finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
        lease_expires_at = NULL,
        lease_role = NULL,
        last_error = left(jobs_fail.error, 10000),
        errors = _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                  'error', left(jobs_fail.error, 10000),
                                                                  'worker', j.lease_holder))
    WHERE j.id = jobs_fail.id
      AND j.state = 'running'
      AND j.attempts = jobs_fail.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.state, j.queue, j.run_at, j.claim_id, j.superseded_by IS NOT NULL
    INTO v_state, v_queue, v_run_at, v_claim, v_superseded;
    IF v_state IS NULL THEN
        RETURN NULL;
    END IF;
    IF v_superseded AND v_state = 'queued' THEN
        -- Cancelled instead when its key went to a newer job (_jobs_unique_key_superseded,
        -- after the update RETURNING saw).
        SELECT j.state INTO v_state FROM jobs j WHERE j.id = jobs_fail.id;
    END IF;
    -- Requeued, the job is back in jobs_queued (trigger jobs_queued_sync).
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    IF v_state = 'queued' AND v_run_at <= now() THEN
        PERFORM pg_notify('jobs_ready', v_queue);
    ELSE
        -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
        PERFORM pg_notify('jobs_ready', q.queue)
        FROM jobs_queues q
        WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    END IF;
    RETURN v_state;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_fail(id bigint, attempt integer, error text, retry_at timestamp with time zone) IS 'skiplock: records a failed attempt (fenced) and requeues with backoff, or marks dead when attempts are exhausted; returns the new state, NULL when not held.';

CREATE FUNCTION skiplock.jobs_get(id bigint) RETURNS TABLE(state skiplock.jobs_state, attempts integer, max_attempts integer, run_at timestamp with time zone, last_error text, created_at timestamp with time zone, finished_at timestamp with time zone, meta jsonb, result jsonb, progress jsonb, workflow_id bigint, depends_on bigint[])
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_get.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_get', 'id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.state, j.attempts, j.max_attempts, j.run_at, j.last_error, j.created_at, j.finished_at, j.meta,
           j.result, j.progress, j.workflow_id, j.depends_on
    FROM jobs j
    WHERE j.id = jobs_get.id;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_get(id bigint) IS 'skiplock: a job''s state, attempts, max_attempts, run_at, last_error, created_at, finished_at, meta, result, progress, workflow_id and depends_on (no payload); no rows for an unknown id.';

CREATE FUNCTION skiplock.jobs_heartbeat(id bigint, attempt integer, lease interval DEFAULT '00:05:00'::interval) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
    v_claim bigint;
    v_lease timestamptz;
BEGIN
    IF jobs_heartbeat.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_heartbeat', 'id', 'must not be NULL');
    END IF;
    IF jobs_heartbeat.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_heartbeat', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_heartbeat.lease IS NULL OR jobs_heartbeat.lease <= interval '0' OR jobs_heartbeat.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_heartbeat', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    UPDATE jobs j
    SET lease_expires_at = now() + jobs_heartbeat.lease
    WHERE j.id = jobs_heartbeat.id
      AND j.state = 'running'
      AND j.attempts = jobs_heartbeat.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.claim_id, j.lease_expires_at INTO v_claim, v_lease;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- A shorter lease than the claim's: jobs_requeue_expired must look at the claim by then.
    UPDATE jobs_claims c SET expires_at = v_lease WHERE c.claim_id = v_claim AND c.expires_at > v_lease;
    RETURN true;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_heartbeat(id bigint, attempt integer, lease interval) IS 'skiplock: extends the lease of a running job held at this attempt (fenced); false means the job is no longer yours.';

CREATE FUNCTION skiplock.jobs_heartbeat_many(ids bigint[], attempts integer[], lease interval DEFAULT '00:05:00'::interval) RETURNS TABLE(id bigint, extended boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_extended bigint[];
    v_id bigint;
    v_attempt integer;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
    v_claims bigint[];
    v_claim  record;
BEGIN
    PERFORM _jobs_check_fence_arrays('jobs_heartbeat_many', jobs_heartbeat_many.ids, jobs_heartbeat_many.attempts);
    IF jobs_heartbeat_many.lease IS NULL OR jobs_heartbeat_many.lease <= interval '0' OR jobs_heartbeat_many.lease > interval '100 years' THEN
        PERFORM _jobs_invalid('jobs_heartbeat_many', 'lease', 'must be a positive interval of at most 100 years');
    END IF;

    -- Each pair is looked up through jobs_pkey (the LATERAL subquery, which its row lock
    -- keeps from being flattened into a join), in id order, so the cost follows the batch,
    -- not the number of running jobs, whatever plan the statistics suggest. SKIP LOCKED:
    -- a row another session has locked is left for the loop below.
    WITH held AS (
        SELECT l.id
        FROM (SELECT t.id, t.attempt
              FROM unnest(jobs_heartbeat_many.ids, jobs_heartbeat_many.attempts) AS t(id, attempt)
              ORDER BY t.id) AS t
        CROSS JOIN LATERAL (
            SELECT j.id
            FROM jobs j
            WHERE j.id = t.id
              AND j.attempts = t.attempt
              AND j.state = 'running'
              AND (j.lease_role IS NULL OR j.lease_role = v_login)
            FOR NO KEY UPDATE SKIP LOCKED
        ) AS l
    ), moved AS (
        UPDATE jobs j
        SET lease_expires_at = now() + jobs_heartbeat_many.lease
        WHERE j.id = ANY (ARRAY(SELECT held.id FROM held))
        RETURNING j.id, j.claim_id
    )
    SELECT coalesce(array_agg(moved.id), '{}'), coalesce(array_agg(DISTINCT moved.claim_id), '{}')
    INTO v_extended, v_claims
    FROM moved;

    -- A shorter lease than a claim's: jobs_requeue_expired must look at the claim by then. One
    -- claim at a time, in claim_id order (the order completions lock them in).
    FOR v_claim IN
        SELECT c.claim_id FROM jobs_claims c
        WHERE c.claim_id = ANY (v_claims) AND c.expires_at > now() + jobs_heartbeat_many.lease
        ORDER BY c.claim_id
    LOOP
        UPDATE jobs_claims c SET expires_at = now() + jobs_heartbeat_many.lease
        WHERE c.claim_id = v_claim.claim_id AND c.expires_at > now() + jobs_heartbeat_many.lease;
    END LOOP;

    RETURN QUERY SELECT e.id, true FROM unnest(v_extended) AS e(id);

    -- The pairs not extended: still held (by the snapshot's reading) when another session
    -- has the row locked, gone otherwise. Usually none, and one primary-key probe each.
    FOR v_id, v_attempt IN
        SELECT DISTINCT t.id, t.attempt
        FROM unnest(jobs_heartbeat_many.ids, jobs_heartbeat_many.attempts) AS t(id, attempt)
        WHERE t.id <> ALL (v_extended)
    LOOP
        IF EXISTS (SELECT FROM jobs j
                   WHERE j.id = v_id AND j.attempts = v_attempt AND j.state = 'running'
                     AND (j.lease_role IS NULL OR j.lease_role = v_login)) THEN
            id := v_id;
            extended := false;
            RETURN NEXT;
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_heartbeat_many(ids bigint[], attempts integer[], lease interval) IS 'skiplock: jobs_heartbeat for many (id, attempt) pairs without waiting for row locks; returns (id, extended) for the jobs still held.';

CREATE TABLE skiplock.jobs (
    id bigint NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    kind text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    state skiplock.jobs_state DEFAULT 'queued'::skiplock.jobs_state NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_holder text,
    lease_expires_at timestamp with time zone,
    last_error text,
    errors jsonb DEFAULT '[]'::jsonb NOT NULL,
    unique_key text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    concurrency_key text,
    started_at timestamp with time zone,
    meta jsonb,
    lease_role oid,
    claim_id bigint,
    workflow_id bigint,
    workflow_step text,
    depends_on bigint[],
    pending_parents integer,
    on_parent_failure text,
    has_children boolean,
    notify_finished boolean,
    cancelled_by bigint,
    result jsonb,
    checkpoints jsonb,
    progress jsonb,
    unique_for interval,
    superseded_by bigint,
    CONSTRAINT jobs_attempts_valid CHECK ((attempts >= 0)),
    CONSTRAINT jobs_errors_is_array CHECK ((jsonb_typeof(errors) = 'array'::text)),
    CONSTRAINT jobs_kind_valid CHECK (((kind <> ''::text) AND (octet_length(kind) <= 200))),
    CONSTRAINT jobs_lease_valid CHECK ((((state = 'running'::skiplock.jobs_state) = (lease_expires_at IS NOT NULL)) AND ((state <> 'running'::skiplock.jobs_state) OR (lease_holder IS NOT NULL)))),
    CONSTRAINT jobs_max_attempts_valid CHECK ((max_attempts >= 1)),
    CONSTRAINT jobs_queue_valid CHECK (((queue <> ''::text) AND (octet_length(queue) <= 200))),
    CONSTRAINT jobs_run_at_finite CHECK (isfinite(run_at))
)
WITH (autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_insert_scale_factor='0.01', fillfactor='40');

COMMENT ON TABLE skiplock.jobs IS 'skiplock jobs: one row per job, in every state. Change rows only through the jobs_* functions.';

COMMENT ON COLUMN skiplock.jobs.lease_role IS 'skiplock: the oid of the login (session_user) that took the running job''s lease; the fenced calls of other logins do not match it. NULL when not running, or for a lease taken before it was recorded.';

COMMENT ON COLUMN skiplock.jobs.claim_id IS 'skiplock: the jobs_claims row of the claim that leased the job last (a running job''s lease is listed there).';

COMMENT ON COLUMN skiplock.jobs.workflow_id IS 'skiplock: the workflow the job is a step of (jobs_enqueue_workflow: the id of its first step); NULL for other jobs.';

COMMENT ON COLUMN skiplock.jobs.workflow_step IS 'skiplock: the step''s name within its workflow; NULL for other jobs.';

COMMENT ON COLUMN skiplock.jobs.depends_on IS 'skiplock: the ids of the job''s parents (jobs_enqueue''s depends_on); NULL for a job without parents.';

COMMENT ON COLUMN skiplock.jobs.pending_parents IS 'skiplock: how many of the job''s parents have not finished in a way that lets it run (jobs_dependencies rows not resolved); NULL without parents.';

COMMENT ON COLUMN skiplock.jobs.on_parent_failure IS 'skiplock: what a dead or cancelled parent does to the job: cancel (the default) or run; NULL without parents.';

COMMENT ON COLUMN skiplock.jobs.has_children IS 'skiplock: true when some job depends on this one; NULL otherwise.';

COMMENT ON COLUMN skiplock.jobs.notify_finished IS 'skiplock: true when the job NOTIFYs jobs_finished as it becomes done, dead or cancelled; NULL otherwise.';

COMMENT ON COLUMN skiplock.jobs.cancelled_by IS 'skiplock: the parent whose end (dead or cancelled) cancelled this job; jobs_retry of that parent brings it back. NULL otherwise.';

COMMENT ON COLUMN skiplock.jobs.result IS 'skiplock: what the job returned (jobs_complete''s result); NULL for none.';

COMMENT ON COLUMN skiplock.jobs.checkpoints IS 'skiplock: the values of the job''s finished steps (jobs_checkpoint), by step name; NULL for none.';

COMMENT ON COLUMN skiplock.jobs.progress IS 'skiplock: the job''s last reported progress (jobs_progress); NULL for none.';

COMMENT ON COLUMN skiplock.jobs.unique_for IS 'skiplock: how long the job''s unique_key stays taken after it finished (jobs_enqueue''s unique_for); NULL for other jobs.';

COMMENT ON COLUMN skiplock.jobs.superseded_by IS 'skiplock: the job that an enqueue with on_duplicate ''replace'' gave this job''s unique_key to while it ran; NULL otherwise.';

CREATE FUNCTION skiplock.jobs_inspect(id bigint) RETURNS SETOF skiplock.jobs
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_inspect.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_inspect', 'id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.*
    FROM jobs j
    WHERE j.id = jobs_inspect.id;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_inspect(id bigint) IS 'skiplock: one job''s whole row (payload, error history, lease, timestamps), for operators; no rows for an unknown id.';

CREATE FUNCTION skiplock.jobs_list(state skiplock.jobs_state DEFAULT NULL::skiplock.jobs_state, queue text DEFAULT NULL::text, kind text DEFAULT NULL::text, max_jobs integer DEFAULT 50, before_id bigint DEFAULT NULL::bigint) RETURNS SETOF skiplock.jobs_listed
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET jit TO 'off'
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

COMMENT ON FUNCTION skiplock.jobs_list(state skiplock.jobs_state, queue text, kind text, max_jobs integer, before_id bigint) IS 'skiplock: one page of jobs (no payload), newest first, filtered by state, queue and kind; keyset paging with before_id.';

CREATE FUNCTION skiplock.jobs_maintain(max_jobs integer DEFAULT 10000) RETURNS skiplock.jobs_maintenance
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
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

COMMENT ON FUNCTION skiplock.jobs_maintain(max_jobs integer) IS 'skiplock: one round of housekeeping (requeue expired leases, prune by jobs_settings retention); one session at a time, others return ran = false.';

CREATE FUNCTION skiplock.jobs_metrics() RETURNS SETOF skiplock.jobs_queue_metrics
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_reltuples double precision;
    v_sampled   boolean;
BEGIN
    SELECT c.reltuples INTO v_reltuples FROM pg_class c WHERE c.oid = 'jobs'::regclass;
    IF v_reltuples < 0 THEN
        v_reltuples := NULL; -- never vacuumed or analyzed
    END IF;
    -- Whether ANALYZE has sampled jobs.queue: without it, no queue has a share to go by.
    v_sampled := EXISTS (
        SELECT FROM pg_stats s
        WHERE s.schemaname = current_schema()
          AND s.tablename = 'jobs'
          AND s.attname = 'queue');

    RETURN QUERY
    WITH queued AS (
        SELECT q.queue,
               count(*) FILTER (WHERE q.run_at <= now()) AS ready,
               count(*) FILTER (WHERE q.run_at > now()) AS scheduled,
               min(q.run_at) FILTER (WHERE q.run_at <= now()) AS oldest_ready
        FROM jobs_queued q
        GROUP BY q.queue
    ), running AS (
        -- The jobs listed by the claims and still running under them.
        SELECT c.queue,
               count(*) AS running,
               count(*) FILTER (WHERE j.lease_expires_at < now()) AS expired
        FROM jobs_claims c
        CROSS JOIN LATERAL unnest(c.ids) AS u(id)
        -- One primary-key probe per listed job, whatever the statistics (OFFSET 0 keeps
        -- the planner from joining the tables another way).
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = u.id OFFSET 0) j
        WHERE j.claim_id = c.claim_id
          AND j.state = 'running'
        GROUP BY c.queue
    ), waiting AS (
        SELECT j.queue, count(*) AS waiting
        FROM (SELECT DISTINCT d.child_id AS id FROM jobs_dependencies d WHERE NOT d.resolved) AS w
        CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = w.id OFFSET 0) j
        WHERE j.state = 'waiting'
        GROUP BY j.queue
    ), failed AS (
        SELECT d.queue,
               count(*) FILTER (WHERE d.state = 'dead') AS dead,
               count(*) FILTER (WHERE d.state = 'cancelled') AS cancelled
        FROM jobs_dead_cancelled d
        GROUP BY d.queue
    ), sampled AS (
        -- Each queue's share of the table's rows in the last ANALYZE's sample.
        SELECT m.queue, m.freq
        FROM pg_stats s
        CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS m(queue, freq)
        WHERE s.schemaname = current_schema()
          AND s.tablename = 'jobs'
          AND s.attname = 'queue'
    ), per_queue AS (
        SELECT q.queue,
               coalesce(qu.ready, 0) AS ready,
               coalesce(qu.scheduled, 0) AS scheduled,
               coalesce(r.running, 0) AS running,
               coalesce(r.expired, 0) AS expired,
               coalesce(f.dead, 0) AS dead,
               coalesce(f.cancelled, 0) AS cancelled,
               coalesce(w.waiting, 0) AS waiting,
               -- NULL, not 0, without statistics (greatest() would turn NULL into 0).
               CASE WHEN v_reltuples IS NOT NULL AND v_sampled THEN
                   greatest(round(v_reltuples * coalesce(sa.freq, 0))::bigint
                            - coalesce(qu.ready, 0) - coalesce(qu.scheduled, 0) - coalesce(r.running, 0)
                            - coalesce(f.dead, 0) - coalesce(f.cancelled, 0) - coalesce(w.waiting, 0), 0)
               END AS done_estimate,
               qu.oldest_ready
        FROM (SELECT queued.queue FROM queued
              UNION SELECT running.queue FROM running
              UNION SELECT failed.queue FROM failed
              UNION SELECT waiting.queue FROM waiting
              UNION SELECT sampled.queue FROM sampled
              UNION SELECT s.queue FROM jobs_queues s) AS q
        LEFT JOIN queued qu ON qu.queue = q.queue
        LEFT JOIN running r ON r.queue = q.queue
        LEFT JOIN failed f ON f.queue = q.queue
        LEFT JOIN waiting w ON w.queue = q.queue
        LEFT JOIN sampled sa ON sa.queue = q.queue
    )
    SELECT p.queue, p.ready, p.scheduled, p.running, p.expired, p.dead, p.cancelled,
           p.done_estimate,
           extract(epoch FROM now() - p.oldest_ready)::double precision,
           NULL::bigint,
           coalesce(s.paused, false), s.max_running, s.per_key, s.max_starts, s.per, p.waiting,
           coalesce(s.fair, false), coalesce(s.ordered, false), coalesce(s.rate_per_key, false)
    FROM per_queue p
    LEFT JOIN jobs_queues s ON s.queue = p.queue
    -- A queue known only from stale statistics, with nothing left in it and no settings, is
    -- not listed.
    WHERE p.ready + p.scheduled + p.running + p.dead + p.cancelled + p.waiting + coalesce(p.done_estimate, 0) > 0
       OR s.queue IS NOT NULL
    UNION ALL
    SELECT NULL::text,
           coalesce(sum(p.ready), 0)::bigint,
           coalesce(sum(p.scheduled), 0)::bigint,
           coalesce(sum(p.running), 0)::bigint,
           coalesce(sum(p.expired), 0)::bigint,
           coalesce(sum(p.dead), 0)::bigint,
           coalesce(sum(p.cancelled), 0)::bigint,
           CASE WHEN v_reltuples IS NOT NULL THEN
               greatest(round(v_reltuples)::bigint
                        - coalesce(sum(p.ready + p.scheduled + p.running + p.dead + p.cancelled + p.waiting), 0)::bigint, 0)
           END,
           extract(epoch FROM now() - min(p.oldest_ready))::double precision,
           coalesce(pg_sequence_last_value(pg_get_serial_sequence('jobs', 'id')::regclass), 0),
           NULL::boolean, NULL::integer, NULL::integer, NULL::integer, NULL::interval,
           coalesce(sum(p.waiting), 0)::bigint,
           NULL::boolean, NULL::boolean, NULL::boolean
    FROM per_queue p
    ORDER BY 1 NULLS LAST;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_metrics() IS 'skiplock: per queue ready, scheduled, running, expired, dead, cancelled, estimated done and oldest ready age, without reading finished rows; a NULL-queue row totals them with jobs created ever.';

CREATE FUNCTION skiplock.jobs_next_start(queue text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_q     record;
    v_n     integer;
    v_first timestamptz;
BEGIN
    IF jobs_next_start.queue IS NULL OR jobs_next_start.queue = '' OR octet_length(jobs_next_start.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_next_start', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;

    SELECT q.max_starts, q.per, q.rate_per_key INTO v_q
    FROM jobs_queues q
    WHERE q.queue = jobs_next_start.queue AND NOT q.paused AND q.max_starts IS NOT NULL;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    IF v_q.rate_per_key THEN
        -- Per key, the same rule: the (n - max_starts + 1)th oldest start of each full key.
        RETURN (SELECT min(t.started_at) + v_q.per
                FROM (SELECT s.started_at,
                             count(*) OVER (PARTITION BY s.concurrency_key) AS n,
                             row_number() OVER (PARTITION BY s.concurrency_key ORDER BY s.started_at) AS rn
                      FROM jobs_queue_starts s
                      WHERE s.queue = jobs_next_start.queue AND s.started_at > now() - v_q.per) t
                WHERE t.n >= v_q.max_starts AND t.rn = t.n - v_q.max_starts + 1);
    END IF;

    -- The claim counts every start after its now() - per; a start is allowed once fewer
    -- than max_starts of them are left, that is when the (v_n - max_starts + 1)th oldest
    -- of them (and every start tied with it) is per old.
    SELECT count(*)::integer INTO v_n
    FROM jobs_queue_starts s
    WHERE s.queue = jobs_next_start.queue AND s.started_at > now() - v_q.per;
    IF v_n < v_q.max_starts THEN
        RETURN now();
    END IF;
    SELECT s.started_at INTO v_first
    FROM jobs_queue_starts s
    WHERE s.queue = jobs_next_start.queue AND s.started_at > now() - v_q.per
    ORDER BY s.started_at
    OFFSET v_n - v_q.max_starts
    LIMIT 1;
    RETURN v_first + v_q.per;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_next_start(queue text) IS 'skiplock: when a rate-limited queue may start its next job (NULL: no rate limit); workers sleep until then.';

CREATE FUNCTION skiplock.jobs_notify(queue text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_notify.queue IS NULL OR jobs_notify.queue = '' OR octet_length(jobs_notify.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_notify', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    PERFORM pg_notify('jobs_ready', jobs_notify.queue);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_notify(queue text) IS 'skiplock: wakes the workers of a queue (NOTIFY jobs_ready at commit), for jobs enqueued with notify => false.';

CREATE FUNCTION skiplock.jobs_pause(queue text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_paused boolean;
BEGIN
    IF jobs_pause.queue IS NULL OR jobs_pause.queue = '' OR octet_length(jobs_pause.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_pause', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;

    INSERT INTO jobs_queues AS q (queue, paused)
    VALUES (jobs_pause.queue, true)
    ON CONFLICT (queue) DO UPDATE
    SET paused = true,
        updated_at = now()
    WHERE NOT q.paused
    RETURNING true INTO v_paused;
    RETURN coalesce(v_paused, false);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_pause(queue text) IS 'skiplock: pauses a queue (jobs_claim hands out none of its jobs); true when this call paused it.';

CREATE FUNCTION skiplock.jobs_progress(id bigint, attempt integer, progress jsonb) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_progress.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_progress', 'id', 'must not be NULL');
    END IF;
    IF jobs_progress.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_progress', 'attempt', 'must not be NULL');
    END IF;
    IF octet_length(jobs_progress.progress::text) > 1048576 THEN
        PERFORM _jobs_invalid('jobs_progress', 'progress', 'must be at most 1 MB (as JSON text)');
    END IF;

    UPDATE jobs j
    SET progress = jobs_progress.progress
    WHERE j.id = jobs_progress.id
      AND j.state = 'running'
      AND j.attempts = jobs_progress.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login);
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_progress(id bigint, attempt integer, progress jsonb) IS 'skiplock: records a running job''s progress when the caller still holds it (fenced); returns whether it did.';

CREATE FUNCTION skiplock.jobs_prune(older_than interval DEFAULT '7 days'::interval, include_dead boolean DEFAULT false, max_jobs integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    IF jobs_prune.older_than IS NULL OR jobs_prune.older_than < interval '0' THEN
        PERFORM _jobs_invalid('jobs_prune', 'older_than', 'must be an interval >= 0');
    END IF;
    IF jobs_prune.include_dead IS NULL THEN
        PERFORM _jobs_invalid('jobs_prune', 'include_dead', 'must not be NULL');
    END IF;
    IF jobs_prune.max_jobs IS NULL OR jobs_prune.max_jobs < 1 THEN
        PERFORM _jobs_invalid('jobs_prune', 'max_jobs', 'must be at least 1');
    END IF;

    WITH doomed AS (
        SELECT j.id
        FROM jobs j
        WHERE j.finished_at IS NOT NULL
          -- Capped so that an absurd retention cannot overflow the timestamp range; nothing
          -- finished 1000 years ago, so the cap changes no result.
          AND j.finished_at < now() - least(jobs_prune.older_than, interval '1000 years')
          AND (j.state IN ('done', 'cancelled') OR (jobs_prune.include_dead AND j.state = 'dead'))
          AND ((j.workflow_id IS NULL AND j.has_children IS NULL)
               OR _jobs_prunable(j.id, j.workflow_id, j.has_children,
                                 now() - least(jobs_prune.older_than, interval '1000 years')))
        ORDER BY j.id
        LIMIT jobs_prune.max_jobs
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobs j
    -- Through jobs_pkey; a join with doomed may be planned as a scan of the whole table.
    WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_prune(older_than interval, include_dead boolean, max_jobs integer) IS 'skiplock: deletes finished (done, cancelled; dead if include_dead) jobs older than older_than, at most max_jobs per call.';

CREATE FUNCTION skiplock.jobs_publish(topic text, payload jsonb DEFAULT '{}'::jsonb, run_at timestamp with time zone DEFAULT now(), priority integer DEFAULT 0, max_attempts integer DEFAULT 5, concurrency_key text DEFAULT NULL::text, meta jsonb DEFAULT NULL::jsonb, notify boolean DEFAULT true) RETURNS bigint[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_queues text[];
    v_kinds  text[];
    v_n      integer;
BEGIN
    IF jobs_publish.topic IS NULL OR jobs_publish.topic = '' OR octet_length(jobs_publish.topic) > 200 THEN
        PERFORM _jobs_invalid('jobs_publish', 'topic', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_publish.payload IS NULL THEN
        PERFORM _jobs_invalid('jobs_publish', 'payload', 'must not be NULL (use ''{}'' for no payload)');
    END IF;
    IF jobs_publish.run_at IS NULL OR NOT isfinite(jobs_publish.run_at) THEN
        PERFORM _jobs_invalid('jobs_publish', 'run_at', 'must be a finite timestamp');
    END IF;
    IF jobs_publish.priority IS NULL THEN
        PERFORM _jobs_invalid('jobs_publish', 'priority', 'must not be NULL');
    END IF;
    IF jobs_publish.max_attempts IS NULL OR jobs_publish.max_attempts < 1 THEN
        PERFORM _jobs_invalid('jobs_publish', 'max_attempts', 'must be at least 1');
    END IF;
    IF jobs_publish.concurrency_key = '' OR octet_length(jobs_publish.concurrency_key) > 200 THEN
        PERFORM _jobs_invalid('jobs_publish', 'concurrency_key', 'must be NULL or a non-empty string of at most 200 bytes');
    END IF;
    IF jsonb_typeof(jobs_publish.meta) <> 'object' THEN
        PERFORM _jobs_invalid('jobs_publish', 'meta', 'must be NULL or a JSON object');
    END IF;
    IF jobs_publish.notify IS NULL THEN
        PERFORM _jobs_invalid('jobs_publish', 'notify', 'must not be NULL');
    END IF;

    -- The subscriptions, in one statement: one snapshot, so one moment (see Promises). They
    -- satisfy jobs_enqueue's checks of kind and queue by their table's constraints.
    SELECT coalesce(array_agg(s.queue ORDER BY s.queue, s.kind), '{}'),
           coalesce(array_agg(s.kind ORDER BY s.queue, s.kind), '{}'),
           count(*)
    INTO v_queues, v_kinds, v_n
    FROM jobs_topic_subscriptions s
    WHERE s.topic = jobs_publish.topic;

    IF v_n = 0 THEN
        RETURN '{}';
    END IF;
    IF v_n > 100000 THEN
        PERFORM _jobs_invalid('jobs_publish', 'topic',
            format('has %s subscriptions, more than the 100000 jobs one call may add', v_n));
    END IF;

    RETURN ARRAY(
        SELECT e.id
        FROM jobs_enqueue_many(
                 kinds            => v_kinds,
                 payloads         => array_fill(jobs_publish.payload, ARRAY[v_n]),
                 queues           => v_queues,
                 run_ats          => array_fill(jobs_publish.run_at, ARRAY[v_n]),
                 priorities       => array_fill(jobs_publish.priority, ARRAY[v_n]),
                 max_attempts     => array_fill(jobs_publish.max_attempts, ARRAY[v_n]),
                 concurrency_keys => array_fill(jobs_publish.concurrency_key, ARRAY[v_n]),
                 metas            => array_fill(jobs_publish.meta, ARRAY[v_n]),
                 notify           => jobs_publish.notify
             ) WITH ORDINALITY AS e(id, ord)
        ORDER BY e.ord);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_publish(topic text, payload jsonb, run_at timestamp with time zone, priority integer, max_attempts integer, concurrency_key text, meta jsonb, notify boolean) IS 'skiplock: adds one job per subscription of a topic (kind and queue from the subscription); returns their ids, empty without subscribers.';

CREATE FUNCTION skiplock.jobs_queue_limited(queue text) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_queue_limited.queue IS NULL OR jobs_queue_limited.queue = '' OR octet_length(jobs_queue_limited.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_queue_limited', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    RETURN EXISTS (
        SELECT FROM jobs_queues q
        WHERE q.queue = jobs_queue_limited.queue
          AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.max_starts IS NOT NULL
               OR q.fair OR q.ordered));
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_queue_limited(queue text) IS 'skiplock: whether the queue has a concurrency or rate limit, fair sharing or ordered keys; workers claim no more than their free slots from such a queue.';

CREATE FUNCTION skiplock.jobs_requeue_expired() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_claims   bigint[];
    v_count    integer;
    v_released bigint[];
    v_queues   text[];
    v_claim    record;
BEGIN
    v_claims := ARRAY(SELECT c.claim_id FROM jobs_claims c WHERE c.expires_at < now());
    IF cardinality(v_claims) = 0 THEN
        RETURN 0;
    END IF;

    WITH expired AS (
        SELECT j.id
        FROM jobs j
        WHERE j.id = ANY (ARRAY(SELECT u.id
                                FROM jobs_claims c
                                CROSS JOIN LATERAL unnest(c.ids) AS u(id)
                                WHERE c.claim_id = ANY (v_claims)))
          AND j.claim_id = ANY (v_claims)
          AND j.state = 'running'
          AND j.lease_expires_at < now()
        ORDER BY j.id
        FOR NO KEY UPDATE SKIP LOCKED
    ), requeued AS (
        UPDATE jobs j
        SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'queued' END::jobs_state,
            run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at ELSE now() END,
            finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
            last_error = format('lease expired at %s (held by %s, attempt %s)',
                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                j.lease_holder, j.attempts),
            errors = _jobs_errors_append(j.errors, jsonb_build_object(
                'attempt', j.attempts, 'at', now(),
                'error', format('lease expired at %s (held by %s, attempt %s)',
                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                j.lease_holder, j.attempts),
                'worker', j.lease_holder)),
            lease_expires_at = NULL,
            lease_role = NULL
        -- Through jobs_pkey; a join with expired may be planned as a scan of the whole table.
        WHERE j.id = ANY (ARRAY(SELECT expired.id FROM expired))
          AND j.state = 'running'
          AND j.lease_expires_at < now()
        -- Queued again, a job is back in jobs_queued (trigger jobs_queued_sync).
        RETURNING j.id, j.queue, j.state, j.claim_id
    )
    SELECT count(*)::integer, coalesce(array_agg(r.claim_id), '{}'),
           coalesce(array_agg(DISTINCT r.queue) FILTER (
               WHERE r.state = 'queued'
                  -- a dead job of a concurrency-limited queue gives its slot back too
                  OR EXISTS (SELECT FROM jobs_queues q
                             WHERE q.queue = r.queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered))),
               '{}')
    INTO v_count, v_released, v_queues
    FROM requeued r;

    PERFORM _jobs_claims_release(v_released);

    -- What is left of each claim looked at: the jobs still running under it (heartbeats moved
    -- their leases on, or another session held them). The earliest of their leases is when to
    -- look again; a claim with none goes. SKIP LOCKED, after the waits above in claim_id
    -- order, so this cannot deadlock with a completion; a claim skipped stays due.
    FOR v_claim IN
        SELECT c.claim_id,
               (SELECT min(j.lease_expires_at)
                FROM unnest(c.ids) AS u(id)
                -- One primary-key probe per listed job, whatever the statistics (OFFSET 0 keeps
                -- the planner from joining the tables another way).
                CROSS JOIN LATERAL (SELECT * FROM jobs j1 WHERE j1.id = u.id OFFSET 0) j
                WHERE j.claim_id = c.claim_id AND j.state = 'running') AS next_expiry
        FROM jobs_claims c
        WHERE c.claim_id = ANY (v_claims)
        ORDER BY c.claim_id
        FOR NO KEY UPDATE SKIP LOCKED
    LOOP
        IF v_claim.next_expiry IS NULL THEN
            DELETE FROM jobs_claims c WHERE c.claim_id = v_claim.claim_id;
        ELSE
            UPDATE jobs_claims c SET expires_at = v_claim.next_expiry WHERE c.claim_id = v_claim.claim_id;
        END IF;
    END LOOP;

    PERFORM pg_notify('jobs_ready', q.queue) FROM unnest(v_queues) AS q(queue);
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_requeue_expired() IS 'skiplock: running jobs whose lease expired go back to queued (or dead when out of attempts); safe to call concurrently; returns the count.';

CREATE FUNCTION skiplock.jobs_result(id bigint) RETURNS TABLE(state skiplock.jobs_state, result jsonb, last_error text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_result.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_result', 'id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.state, j.result, j.last_error
    FROM jobs j
    WHERE j.id = jobs_result.id;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_result(id bigint) IS 'skiplock: a job''s state, result and last_error; no rows for an unknown id.';

CREATE FUNCTION skiplock.jobs_resume(queue text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_resume.queue IS NULL OR jobs_resume.queue = '' OR octet_length(jobs_resume.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_resume', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;

    UPDATE jobs_queues q
    SET paused = false,
        updated_at = now()
    WHERE q.queue = jobs_resume.queue
      AND q.paused;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    DELETE FROM jobs_queues q
    WHERE q.queue = jobs_resume.queue
      AND q.max_running IS NULL AND q.per_key IS NULL AND q.max_starts IS NULL
      AND NOT q.fair AND NOT q.ordered;
    PERFORM pg_notify('jobs_ready', jobs_resume.queue);
    RETURN true;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_resume(queue text) IS 'skiplock: resumes a paused queue and wakes workers; true when this call resumed it.';

CREATE FUNCTION skiplock.jobs_retry(id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_queue    text;
    v_shard    integer;
    v_attempts integer;
    v_state    jobs_state;
    v_children boolean;
    v_parent   bigint;
BEGIN
    IF jobs_retry.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_retry', 'id', 'must not be NULL');
    END IF;

    UPDATE jobs j
    -- A job still waiting for a parent goes back to waiting.
    SET state = CASE WHEN j.pending_parents > 0 THEN 'waiting' ELSE 'queued' END::jobs_state,
        run_at = now(),
        max_attempts = greatest(j.max_attempts, j.attempts + 1),
        finished_at = NULL,
        cancelled_by = NULL
    WHERE j.id = jobs_retry.id
      AND j.state IN ('dead', 'cancelled')
      -- Read in this statement, whose snapshot is taken once it holds its lock on jobs: a
      -- jobs_set_shard committing meanwhile (it holds jobs exclusively) is seen.
      AND j.id % 1024 = coalesce((SELECT s.shard FROM jobs_settings s), j.id % 1024)
      -- attempts + 1 must fit in an integer (and be a fencing token never handed out).
      AND j.attempts < 2147483647
      -- Not while a parent it waits for has ended dead or cancelled (refused below).
      AND (coalesce(j.pending_parents, 0) = 0 OR NOT EXISTS (
              SELECT FROM jobs_dependencies pd
              JOIN jobs pj ON pj.id = pd.parent_id
              WHERE pd.child_id = j.id
                AND NOT pd.resolved
                AND pj.state IN ('dead', 'cancelled')))
    RETURNING j.queue, j.state, j.has_children INTO v_queue, v_state, v_children;
    IF NOT FOUND THEN
        -- Why not: only these two refusals raise; any other state or an unknown id is false.
        SELECT j.attempts INTO v_attempts
        FROM jobs j
        WHERE j.id = jobs_retry.id AND j.state IN ('dead', 'cancelled');
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        v_shard := (SELECT s.shard FROM jobs_settings s);
        IF v_shard IS NOT NULL AND jobs_retry.id % 1024 <> v_shard THEN
            RAISE EXCEPTION 'jobs_retry: job % cannot be queued again on shard %: its id names shard %',
                    jobs_retry.id, v_shard, jobs_retry.id % 1024
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'A router would send its completion to another shard. Enqueue its payload again to run it here under a new id.';
        END IF;
        SELECT min(pd.parent_id) INTO v_parent
        FROM jobs_dependencies pd
        JOIN jobs pj ON pj.id = pd.parent_id
        WHERE pd.child_id = jobs_retry.id
          AND NOT pd.resolved
          AND pj.state IN ('dead', 'cancelled');
        IF v_parent IS NOT NULL THEN
            RAISE EXCEPTION 'jobs_retry: job % waits for its parent %, which ended % (it would wait forever)',
                    jobs_retry.id, v_parent, (SELECT pj.state FROM jobs pj WHERE pj.id = v_parent)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Retry the parent: that brings its descendants back.';
        END IF;
        IF v_attempts = 2147483647 THEN
            RAISE EXCEPTION 'jobs_retry: job % has no attempt left: attempts is at its limit, %', jobs_retry.id, v_attempts
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Enqueue its payload again to run it under a new id.';
        END IF;
        RETURN false;
    END IF;

    IF v_children THEN
        PERFORM _jobs_revive(ARRAY[jobs_retry.id]);
    END IF;
    IF v_state = 'queued' THEN
        PERFORM pg_notify('jobs_ready', v_queue);
    END IF;
    RETURN true;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_retry(id bigint) IS 'skiplock: dead or cancelled -> queued now, with at least one more attempt; attempts keep counting.';

CREATE FUNCTION skiplock.jobs_retry_many(ids bigint[] DEFAULT NULL::bigint[], queue text DEFAULT NULL::text, kind text DEFAULT NULL::text, states skiplock.jobs_state[] DEFAULT '{dead}'::skiplock.jobs_state[], max_jobs integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
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

COMMENT ON FUNCTION skiplock.jobs_retry_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) IS 'skiplock: jobs_retry for up to max_jobs jobs matching the filters (default: dead jobs); skips locked rows; returns the count.';

CREATE FUNCTION skiplock.jobs_schedule(name text, cron text, kind text, payload jsonb DEFAULT '{}'::jsonb, queue text DEFAULT 'default'::text, timezone text DEFAULT 'UTC'::text, priority integer DEFAULT 0, max_attempts integer DEFAULT 5, enabled boolean DEFAULT true) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET timezone_abbreviations TO 'Default'
    AS $$
#variable_conflict use_column
DECLARE
    v_next timestamptz;
BEGIN
    IF jobs_schedule.name IS NULL OR jobs_schedule.name = '' OR octet_length(jobs_schedule.name) > 200 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'name', 'must be a non-empty string of at most 200 bytes');
    END IF;
    -- Checks cron and timezone, naming them.
    v_next := _jobs_cron_next('jobs_schedule', jobs_schedule.cron, clock_timestamp(), jobs_schedule.timezone);
    IF v_next IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'cron', format('%L never runs (no run within ten years)', jobs_schedule.cron));
    END IF;
    IF jobs_schedule.kind IS NULL OR jobs_schedule.kind = '' OR octet_length(jobs_schedule.kind) > 200 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'kind', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_schedule.payload IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'payload', 'must not be NULL (use ''{}'' for no payload)');
    END IF;
    IF jobs_schedule.queue IS NULL OR jobs_schedule.queue = '' OR octet_length(jobs_schedule.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_schedule.priority IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'priority', 'must not be NULL');
    END IF;
    IF jobs_schedule.max_attempts IS NULL OR jobs_schedule.max_attempts < 1 THEN
        PERFORM _jobs_invalid('jobs_schedule', 'max_attempts', 'must be at least 1');
    END IF;
    IF jobs_schedule.enabled IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule', 'enabled', 'must not be NULL');
    END IF;

    -- A concurrent jobs_unschedule can delete the row between the upsert that changed
    -- nothing and the read of its next run; then the next round inserts it again.
    LOOP
        INSERT INTO jobs_schedules AS s (name, cron, timezone, kind, payload, queue, priority, max_attempts,
                                         enabled, next_run_at)
        VALUES (jobs_schedule.name, jobs_schedule.cron, jobs_schedule.timezone, jobs_schedule.kind,
                jobs_schedule.payload, jobs_schedule.queue, jobs_schedule.priority, jobs_schedule.max_attempts,
                jobs_schedule.enabled, v_next)
        ON CONFLICT (name) DO UPDATE
        SET cron         = EXCLUDED.cron,
            timezone     = EXCLUDED.timezone,
            kind         = EXCLUDED.kind,
            payload      = EXCLUDED.payload,
            queue        = EXCLUDED.queue,
            priority     = EXCLUDED.priority,
            max_attempts = EXCLUDED.max_attempts,
            enabled      = EXCLUDED.enabled,
            -- Later than last_run_at in every branch (jobs_schedules_next_after_last).
            next_run_at  = CASE
                WHEN s.cron <> EXCLUDED.cron OR s.timezone <> EXCLUDED.timezone OR (NOT s.enabled AND EXCLUDED.enabled)
                THEN _jobs_cron_next('jobs_schedule', EXCLUDED.cron, greatest(clock_timestamp(), s.last_run_at), EXCLUDED.timezone)
                ELSE s.next_run_at
            END,
            updated_at   = now()
        WHERE (s.cron, s.timezone, s.kind, s.payload, s.queue, s.priority, s.max_attempts, s.enabled)
              IS DISTINCT FROM
              (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.payload, EXCLUDED.queue,
               EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.enabled)
        RETURNING s.next_run_at INTO v_next;
        IF FOUND THEN
            RETURN v_next;
        END IF;
        -- Unchanged: the row is locked (ON CONFLICT took the lock) and kept as it is.
        SELECT s.next_run_at INTO v_next
        FROM jobs_schedules s
        WHERE s.name = jobs_schedule.name;
        IF FOUND THEN
            RETURN v_next;
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_schedule(name text, cron text, kind text, payload jsonb, queue text, timezone text, priority integer, max_attempts integer, enabled boolean) IS 'skiplock: creates or updates a named cron schedule and returns its next run time; the same arguments again change nothing.';

CREATE FUNCTION skiplock.jobs_schedule_run(name text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_schedule record;
BEGIN
    IF jobs_schedule_run.name IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule_run', 'name', 'must not be NULL');
    END IF;

    SELECT s.kind, s.payload, s.queue, s.priority, s.max_attempts INTO v_schedule
    FROM jobs_schedules s
    WHERE s.name = jobs_schedule_run.name;
    IF NOT FOUND THEN
        PERFORM _jobs_invalid('jobs_schedule_run', 'name', format('%L is not a schedule', jobs_schedule_run.name));
    END IF;

    RETURN jobs_enqueue(v_schedule.kind, v_schedule.payload, v_schedule.queue, now(),
                        v_schedule.priority, v_schedule.max_attempts);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_schedule_run(name text) IS 'skiplock: enqueues one job from a schedule now, leaving its next and last run alone; returns the job id.';

CREATE FUNCTION skiplock.jobs_schedule_set_enabled(name text, enabled boolean) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET timezone_abbreviations TO 'Default'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_schedule_set_enabled.name IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule_set_enabled', 'name', 'must not be NULL');
    END IF;
    IF jobs_schedule_set_enabled.enabled IS NULL THEN
        PERFORM _jobs_invalid('jobs_schedule_set_enabled', 'enabled', 'must not be NULL');
    END IF;

    UPDATE jobs_schedules s
    SET enabled     = jobs_schedule_set_enabled.enabled,
        -- Later than last_run_at in both branches (jobs_schedules_next_after_last).
        next_run_at = CASE
            WHEN jobs_schedule_set_enabled.enabled
            THEN _jobs_cron_next('jobs_schedule_set_enabled', s.cron, greatest(now(), s.last_run_at), s.timezone)
            ELSE s.next_run_at
        END,
        updated_at  = now()
    WHERE s.name = jobs_schedule_set_enabled.name
      AND s.enabled <> jobs_schedule_set_enabled.enabled;
    IF FOUND THEN
        RETURN true;
    END IF;

    PERFORM FROM jobs_schedules s WHERE s.name = jobs_schedule_set_enabled.name;
    IF NOT FOUND THEN
        PERFORM _jobs_invalid('jobs_schedule_set_enabled', 'name',
                              format('%L is not a schedule', jobs_schedule_set_enabled.name));
    END IF;
    RETURN false;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_schedule_set_enabled(name text, enabled boolean) IS 'skiplock: enables or disables a schedule; true when this call changed it. Re-enabling recomputes the next run from now.';

CREATE FUNCTION skiplock.jobs_schedule_tick() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET timezone_abbreviations TO 'Default'
    AS $$
#variable_conflict use_column
DECLARE
    v_schedule record;
    v_instant  timestamptz;
    v_job_id   bigint;
    v_count    integer := 0;
BEGIN
    FOR v_schedule IN
        SELECT s.name, s.cron, s.timezone, s.kind, s.payload, s.queue, s.priority, s.max_attempts,
               s.next_run_at, s.last_run_at, s.last_job_id
        FROM jobs_schedules s
        WHERE s.enabled
          AND s.next_run_at <= now()
        ORDER BY s.next_run_at
        FOR UPDATE SKIP LOCKED
    LOOP
        -- The row is locked and re-read as of its latest committed version, so another
        -- tick's advance is seen here (and the row then no longer due is not returned).
        v_instant := _jobs_cron_latest('jobs_schedule_tick', v_schedule.cron, v_schedule.timezone,
                                       v_schedule.next_run_at, now());
        v_job_id := v_schedule.last_job_id;
        IF v_schedule.last_run_at IS NULL OR v_instant > v_schedule.last_run_at THEN
            v_job_id := jobs_enqueue(v_schedule.kind, v_schedule.payload, v_schedule.queue, v_instant,
                                     v_schedule.priority, v_schedule.max_attempts);
            v_count := v_count + 1;
        ELSE
            v_instant := v_schedule.last_run_at;
        END IF;
        UPDATE jobs_schedules s
        SET last_run_at = v_instant,
            last_job_id = v_job_id,
            next_run_at = _jobs_cron_next('jobs_schedule_tick', v_schedule.cron, v_instant, v_schedule.timezone)
        WHERE s.name = v_schedule.name;
    END LOOP;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_schedule_tick() IS 'skiplock: enqueues one job per due schedule (the latest missed instant after downtime) and advances it; exactly once per instant.';

CREATE FUNCTION skiplock.jobs_set_concurrency(queue text, max_running integer, per_key integer DEFAULT NULL::integer, fair boolean DEFAULT NULL::boolean, ordered boolean DEFAULT NULL::boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_set_concurrency.queue IS NULL OR jobs_set_concurrency.queue = ''
       OR octet_length(jobs_set_concurrency.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_set_concurrency', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_set_concurrency.max_running < 1 THEN
        PERFORM _jobs_invalid('jobs_set_concurrency', 'max_running', 'must be NULL (no limit) or at least 1');
    END IF;
    IF jobs_set_concurrency.per_key < 1 THEN
        PERFORM _jobs_invalid('jobs_set_concurrency', 'per_key', 'must be NULL (no limit) or at least 1');
    END IF;

    INSERT INTO jobs_queues AS q (queue, max_running, per_key, fair, ordered)
    VALUES (jobs_set_concurrency.queue, jobs_set_concurrency.max_running, jobs_set_concurrency.per_key,
            coalesce(jobs_set_concurrency.fair, false), coalesce(jobs_set_concurrency.ordered, false))
    ON CONFLICT (queue) DO UPDATE
    SET max_running = excluded.max_running,
        per_key = excluded.per_key,
        fair = coalesce(jobs_set_concurrency.fair, q.fair),
        ordered = coalesce(jobs_set_concurrency.ordered, q.ordered),
        -- A fair queue starts its turns anew.
        rr_cursor = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_cursor END,
        rr_unkeyed_priority = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_unkeyed_priority END,
        rr_unkeyed_run_at = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_unkeyed_run_at END,
        rr_unkeyed_id = CASE WHEN coalesce(jobs_set_concurrency.fair, q.fair) THEN q.rr_unkeyed_id END,
        updated_at = now();

    DELETE FROM jobs_queues q
    WHERE q.queue = jobs_set_concurrency.queue
      AND NOT q.paused AND q.max_running IS NULL AND q.per_key IS NULL AND q.max_starts IS NULL
      AND NOT q.fair AND NOT q.ordered;
    PERFORM pg_notify('jobs_ready', jobs_set_concurrency.queue);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_set_concurrency(queue text, max_running integer, per_key integer, fair boolean, ordered boolean) IS 'skiplock: caps how many jobs of a queue run at once (max_running) and per concurrency_key (per_key), exactly and cluster-wide (NULL removes a cap); fair shares claims round-robin across keys, ordered runs each key''s jobs one at a time in enqueue order (NULL keeps the setting).';

CREATE FUNCTION skiplock.jobs_set_rate_limit(queue text, max_starts integer, per interval, per_key boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_set_rate_limit.queue IS NULL OR jobs_set_rate_limit.queue = ''
       OR octet_length(jobs_set_rate_limit.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_set_rate_limit.max_starts < 1 THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'max_starts', 'must be NULL (no limit) or at least 1');
    END IF;
    IF jobs_set_rate_limit.max_starts IS NOT NULL
       AND (jobs_set_rate_limit.per IS NULL OR jobs_set_rate_limit.per <= interval '0'
            OR jobs_set_rate_limit.per > interval '100 years') THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'per', 'must be a positive interval of at most 100 years');
    END IF;
    IF jobs_set_rate_limit.per_key IS NULL THEN
        PERFORM _jobs_invalid('jobs_set_rate_limit', 'per_key', 'must be true or false');
    END IF;

    INSERT INTO jobs_queues AS q (queue, max_starts, per, rate_per_key)
    VALUES (jobs_set_rate_limit.queue, jobs_set_rate_limit.max_starts,
            CASE WHEN jobs_set_rate_limit.max_starts IS NOT NULL THEN jobs_set_rate_limit.per END,
            jobs_set_rate_limit.max_starts IS NOT NULL AND jobs_set_rate_limit.per_key)
    ON CONFLICT (queue) DO UPDATE
    SET max_starts = excluded.max_starts,
        per = excluded.per,
        rate_per_key = excluded.rate_per_key,
        updated_at = now();

    IF jobs_set_rate_limit.max_starts IS NULL THEN
        DELETE FROM jobs_queue_starts s WHERE s.queue = jobs_set_rate_limit.queue;
        DELETE FROM jobs_queues q
        WHERE q.queue = jobs_set_rate_limit.queue
          AND NOT q.paused AND q.max_running IS NULL AND q.per_key IS NULL AND q.max_starts IS NULL
          AND NOT q.fair AND NOT q.ordered;
    END IF;
    PERFORM pg_notify('jobs_ready', jobs_set_rate_limit.queue);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_set_rate_limit(queue text, max_starts integer, per interval, per_key boolean) IS 'skiplock: caps how many jobs of a queue (per_key: of each concurrency_key) are claimed in any window of length per (max_starts); NULL max_starts removes it.';

CREATE FUNCTION skiplock.jobs_set_shard(shard integer) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_stray bigint;
    v_seq   regclass;
    v_last  bigint;
    v_next  bigint;
BEGIN
    IF jobs_set_shard.shard IS NULL OR jobs_set_shard.shard < 0 OR jobs_set_shard.shard > 1023 THEN
        PERFORM _jobs_invalid('jobs_set_shard', 'shard', 'must be between 0 and 1023');
    END IF;

    -- Taken before the check, so no job can be enqueued between the check and the ALTER.
    LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE;

    SELECT j.id INTO v_stray
    FROM jobs j
    WHERE j.state IN ('queued', 'running') AND j.id % 1024 <> jobs_set_shard.shard
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'jobs_set_shard: job % is queued or running and its id does not carry shard %', v_stray, jobs_set_shard.shard
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A router could not reach it. Let unfinished jobs finish, or cancel or delete them, then call jobs_set_shard again.';
    END IF;

    v_seq := pg_get_serial_sequence(format('%I.jobs', current_schema()), 'id')::regclass;
    EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s', v_seq) INTO v_last;
    v_last := greatest(v_last, (SELECT max(j.id) FROM jobs j), 0);
    v_next := (v_last / 1024 + 1) * 1024 + jobs_set_shard.shard;
    EXECUTE format('ALTER TABLE jobs ALTER COLUMN id SET INCREMENT BY 1024 RESTART WITH %s', v_next);

    UPDATE jobs_settings s SET shard = jobs_set_shard.shard;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_set_shard(shard integer) IS 'skiplock: makes this database shard N (0..1023): new job ids carry N in their low 10 bits.';

CREATE FUNCTION skiplock.jobs_shard() RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
    SELECT s.shard FROM jobs_settings s
$$;

COMMENT ON FUNCTION skiplock.jobs_shard() IS 'skiplock: this database''s shard number (jobs_set_shard), or NULL when it is not a shard.';

CREATE FUNCTION skiplock.jobs_snooze(id bigint, attempt integer, run_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_queue text;
    v_claim bigint;
    -- The caller's login: a job whose lease another login took is not the caller's
    -- (jobs.lease_role; NULL for leases taken before it was recorded matches any login).
    v_login regrole := to_regrole(quote_ident(session_user));
BEGIN
    IF jobs_snooze.id IS NULL THEN
        PERFORM _jobs_invalid('jobs_snooze', 'id', 'must not be NULL');
    END IF;
    IF jobs_snooze.attempt IS NULL THEN
        PERFORM _jobs_invalid('jobs_snooze', 'attempt', 'must not be NULL');
    END IF;
    IF jobs_snooze.run_at IS NULL OR NOT isfinite(jobs_snooze.run_at) THEN
        PERFORM _jobs_invalid('jobs_snooze', 'run_at', 'must be a finite timestamp');
    END IF;

    UPDATE jobs j
    SET state = CASE WHEN j.attempts < 2147483647 THEN 'queued' ELSE 'dead' END::jobs_state,
        run_at = CASE WHEN j.attempts < 2147483647 THEN jobs_snooze.run_at ELSE j.run_at END,
        finished_at = CASE WHEN j.attempts < 2147483647 THEN j.finished_at ELSE now() END,
        last_error = CASE WHEN j.attempts < 2147483647 THEN j.last_error
                          ELSE 'no attempt left: attempts is at its limit, 2147483647' END,
        errors = CASE WHEN j.attempts < 2147483647 THEN j.errors
                      ELSE _jobs_errors_append(j.errors, jsonb_build_object(
                               'attempt', j.attempts, 'at', now(),
                               'error', 'no attempt left: attempts is at its limit, 2147483647',
                               'worker', j.lease_holder)) END,
        -- Saturates rather than overflowing, so a job at the int limit can still snooze.
        max_attempts = CASE WHEN j.max_attempts < 2147483647 THEN j.max_attempts + 1 ELSE j.max_attempts END,
        lease_expires_at = NULL,
        lease_role = NULL
    WHERE j.id = jobs_snooze.id
      AND j.state = 'running'
      AND j.attempts = jobs_snooze.attempt
      AND (j.lease_role IS NULL OR j.lease_role = v_login)
    RETURNING j.queue, j.claim_id INTO v_queue, v_claim;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- Queued again, the job is back in jobs_queued (trigger jobs_queued_sync).
    PERFORM _jobs_claims_release(ARRAY[v_claim]);

    IF jobs_snooze.run_at <= now() THEN
        PERFORM pg_notify('jobs_ready', v_queue);
    ELSE
        -- A slot of a concurrency-limited queue came back: wake the workers waiting for one.
        PERFORM pg_notify('jobs_ready', q.queue)
        FROM jobs_queues q
        WHERE q.queue = v_queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL OR q.ordered);
    END IF;
    RETURN true;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_snooze(id bigint, attempt integer, run_at timestamp with time zone) IS 'skiplock: running -> queued at run_at without spending an attempt (fenced; raises max_attempts, never lowers attempts).';

CREATE FUNCTION skiplock.jobs_stats() RETURNS SETOF skiplock.jobs_queue_stats
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT j.queue,
           j.state,
           count(*),
           CASE WHEN j.state = 'queued' THEN now() - min(j.run_at) FILTER (WHERE j.run_at <= now()) END
    FROM jobs j
    GROUP BY j.queue, j.state
    ORDER BY j.queue, j.state;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_stats() IS 'skiplock: per queue and state, the job count and (queued) the age of the oldest due job.';

CREATE FUNCTION skiplock.jobs_subscribe(topic text, queue text, kind text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_new boolean;
BEGIN
    IF jobs_subscribe.topic IS NULL OR jobs_subscribe.topic = '' OR octet_length(jobs_subscribe.topic) > 200 THEN
        PERFORM _jobs_invalid('jobs_subscribe', 'topic', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_subscribe.queue IS NULL OR jobs_subscribe.queue = '' OR octet_length(jobs_subscribe.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_subscribe', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_subscribe.kind IS NULL OR jobs_subscribe.kind = '' OR octet_length(jobs_subscribe.kind) > 200 THEN
        PERFORM _jobs_invalid('jobs_subscribe', 'kind', 'must be a non-empty string of at most 200 bytes');
    END IF;

    INSERT INTO jobs_topic_subscriptions (topic, queue, kind)
    VALUES (jobs_subscribe.topic, jobs_subscribe.queue, jobs_subscribe.kind)
    ON CONFLICT (topic, queue, kind) DO NOTHING
    RETURNING true INTO v_new;
    RETURN coalesce(v_new, false);
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_subscribe(topic text, queue text, kind text) IS 'skiplock: subscribes a queue and kind to a topic (jobs_publish adds one job for it); true when the subscription is new.';

CREATE TABLE skiplock.jobs_topic_subscriptions (
    topic text NOT NULL,
    queue text NOT NULL,
    kind text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT jobs_topic_subscriptions_kind_valid CHECK (((kind <> ''::text) AND (octet_length(kind) <= 200))),
    CONSTRAINT jobs_topic_subscriptions_queue_valid CHECK (((queue <> ''::text) AND (octet_length(queue) <= 200))),
    CONSTRAINT jobs_topic_subscriptions_topic_valid CHECK (((topic <> ''::text) AND (octet_length(topic) <= 200)))
);

COMMENT ON TABLE skiplock.jobs_topic_subscriptions IS 'skiplock: the subscriptions of topics (jobs_publish adds one job per row); changed only by jobs_subscribe and jobs_unsubscribe.';

CREATE FUNCTION skiplock.jobs_subscriptions(topic text DEFAULT NULL::text) RETURNS SETOF skiplock.jobs_topic_subscriptions
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_subscriptions.topic = '' OR octet_length(jobs_subscriptions.topic) > 200 THEN
        PERFORM _jobs_invalid('jobs_subscriptions', 'topic', 'must be NULL or a non-empty string of at most 200 bytes');
    END IF;

    RETURN QUERY
    SELECT s.topic, s.queue, s.kind, s.created_at
    FROM jobs_topic_subscriptions s
    WHERE jobs_subscriptions.topic IS NULL OR s.topic = jobs_subscriptions.topic
    ORDER BY s.topic, s.queue, s.kind;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_subscriptions(topic text) IS 'skiplock: lists the subscriptions of a topic (or of every topic), by topic, queue and kind.';

CREATE FUNCTION skiplock.jobs_unschedule(name text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_unschedule.name IS NULL THEN
        PERFORM _jobs_invalid('jobs_unschedule', 'name', 'must not be NULL');
    END IF;
    DELETE FROM jobs_schedules s
    WHERE s.name = jobs_unschedule.name;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_unschedule(name text) IS 'skiplock: deletes a named cron schedule; returns whether it existed.';

CREATE FUNCTION skiplock.jobs_unsubscribe(topic text, queue text, kind text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_unsubscribe.topic IS NULL OR jobs_unsubscribe.topic = '' OR octet_length(jobs_unsubscribe.topic) > 200 THEN
        PERFORM _jobs_invalid('jobs_unsubscribe', 'topic', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_unsubscribe.queue IS NULL OR jobs_unsubscribe.queue = '' OR octet_length(jobs_unsubscribe.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_unsubscribe', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_unsubscribe.kind IS NULL OR jobs_unsubscribe.kind = '' OR octet_length(jobs_unsubscribe.kind) > 200 THEN
        PERFORM _jobs_invalid('jobs_unsubscribe', 'kind', 'must be a non-empty string of at most 200 bytes');
    END IF;

    DELETE FROM jobs_topic_subscriptions s
    WHERE s.topic = jobs_unsubscribe.topic
      AND s.queue = jobs_unsubscribe.queue
      AND s.kind = jobs_unsubscribe.kind;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_unsubscribe(topic text, queue text, kind text) IS 'skiplock: removes a subscription of a topic; true when one was removed.';

CREATE FUNCTION skiplock.jobs_workflow(workflow_id bigint) RETURNS TABLE(id bigint, workflow_step text, kind text, queue text, state skiplock.jobs_state, depends_on bigint[], attempts integer, max_attempts integer, last_error text, progress jsonb, finished_at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'skiplock', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
BEGIN
    IF jobs_workflow.workflow_id IS NULL THEN
        PERFORM _jobs_invalid('jobs_workflow', 'workflow_id', 'must not be NULL');
    END IF;

    RETURN QUERY
    SELECT j.id, j.workflow_step, j.kind, j.queue, j.state, j.depends_on, j.attempts, j.max_attempts,
           j.last_error, j.progress, j.finished_at
    FROM jobs j
    WHERE j.workflow_id = jobs_workflow.workflow_id
    ORDER BY j.id;
END;
$$;

COMMENT ON FUNCTION skiplock.jobs_workflow(workflow_id bigint) IS 'skiplock: the steps of a workflow (no payloads), parents first; no rows for an unknown workflow.';

CREATE TABLE skiplock.jobs_claims (
    claim_id bigint NOT NULL,
    queue text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    running integer NOT NULL,
    ids bigint[] NOT NULL
)
WITH (fillfactor='50', autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_insert_scale_factor='0.01');
ALTER TABLE ONLY skiplock.jobs_claims ALTER COLUMN ids SET STORAGE MAIN;

COMMENT ON TABLE skiplock.jobs_claims IS 'skiplock (private): one row per claim and queue with jobs still running; changed only by the jobs_* functions.';

ALTER TABLE skiplock.jobs_claims ALTER COLUMN claim_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME skiplock.jobs_claims_claim_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE skiplock.jobs_dead_cancelled (
    id bigint NOT NULL,
    state skiplock.jobs_state NOT NULL,
    queue text NOT NULL,
    finished_at timestamp with time zone NOT NULL
);

COMMENT ON TABLE skiplock.jobs_dead_cancelled IS 'skiplock (private): the dead and cancelled jobs, kept in step with jobs by a trigger.';

CREATE TABLE skiplock.jobs_dependencies (
    parent_id bigint NOT NULL,
    child_id bigint NOT NULL,
    resolved boolean NOT NULL
);

COMMENT ON TABLE skiplock.jobs_dependencies IS 'skiplock (private): one row per dependency between two jobs; changed only by the jobs_* functions.';

ALTER TABLE skiplock.jobs ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME skiplock.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE skiplock.jobs_queue_starts (
    queue text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    concurrency_key text
);

COMMENT ON TABLE skiplock.jobs_queue_starts IS 'skiplock (private): start times of the last window of each rate-limited queue, read by jobs_claim and jobs_next_start.';

COMMENT ON COLUMN skiplock.jobs_queue_starts.concurrency_key IS 'skiplock: the started job''s concurrency_key (counted per key when the queue''s rate_per_key is set).';

CREATE TABLE skiplock.jobs_queued (
    queue text NOT NULL,
    priority integer NOT NULL,
    run_at timestamp with time zone NOT NULL,
    id bigint NOT NULL,
    concurrency_key text
)
WITH (autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_insert_scale_factor='0.01');

COMMENT ON TABLE skiplock.jobs_queued IS 'skiplock (private): one row per queued job, in claim order; changed only by the jobs_* functions.';

CREATE TABLE skiplock.jobs_queues (
    queue text NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    max_running integer,
    per_key integer,
    max_starts integer,
    per interval,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    fair boolean DEFAULT false NOT NULL,
    ordered boolean DEFAULT false NOT NULL,
    rate_per_key boolean DEFAULT false NOT NULL,
    rr_cursor text,
    rr_unkeyed_priority integer,
    rr_unkeyed_run_at timestamp with time zone,
    rr_unkeyed_id bigint,
    CONSTRAINT jobs_queues_max_running_valid CHECK ((max_running >= 1)),
    CONSTRAINT jobs_queues_per_key_valid CHECK ((per_key >= 1)),
    CONSTRAINT jobs_queues_queue_valid CHECK (((queue <> ''::text) AND (octet_length(queue) <= 200))),
    CONSTRAINT jobs_queues_rate_valid CHECK ((((max_starts IS NULL) = (per IS NULL)) AND (max_starts >= 1) AND (per > '00:00:00'::interval)))
);

COMMENT ON TABLE skiplock.jobs_queues IS 'skiplock per-queue settings: paused, concurrency limits (max_running, per_key) and rate limit (max_starts per per). Change only through jobs_pause, jobs_resume, jobs_set_concurrency, jobs_set_rate_limit.';

COMMENT ON COLUMN skiplock.jobs_queues.fair IS 'skiplock: claims take the ready jobs round-robin across concurrency_keys (jobs_set_concurrency''s fair).';

COMMENT ON COLUMN skiplock.jobs_queues.ordered IS 'skiplock: jobs sharing a concurrency_key run one at a time in id order (jobs_set_concurrency''s ordered).';

COMMENT ON COLUMN skiplock.jobs_queues.rate_per_key IS 'skiplock: max_starts per per counts the starts of each concurrency_key (jobs_set_rate_limit''s per_key).';

COMMENT ON COLUMN skiplock.jobs_queues.rr_cursor IS 'skiplock (private): the concurrency_key a fair queue''s last claim took last (NULL: start from the first key).';

COMMENT ON COLUMN skiplock.jobs_queues.rr_unkeyed_id IS 'skiplock (private): with rr_unkeyed_priority and rr_unkeyed_run_at, where a limited queue''s look for jobs without a key goes on past its best ready jobs (NULL: from the front).';

CREATE TABLE skiplock.jobs_schedules (
    name text NOT NULL,
    cron text NOT NULL,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    kind text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    next_run_at timestamp with time zone,
    last_run_at timestamp with time zone,
    last_job_id bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT jobs_schedules_kind_valid CHECK (((kind <> ''::text) AND (octet_length(kind) <= 200))),
    CONSTRAINT jobs_schedules_max_attempts_valid CHECK ((max_attempts >= 1)),
    CONSTRAINT jobs_schedules_name_valid CHECK (((name <> ''::text) AND (octet_length(name) <= 200))),
    CONSTRAINT jobs_schedules_next_after_last CHECK ((next_run_at > last_run_at)),
    CONSTRAINT jobs_schedules_queue_valid CHECK (((queue <> ''::text) AND (octet_length(queue) <= 200)))
);

COMMENT ON TABLE skiplock.jobs_schedules IS 'skiplock schedules: one row per named cron schedule. Change rows only through jobs_schedule and jobs_unschedule.';

CREATE TABLE skiplock.jobs_schema_version (
    version integer NOT NULL
);

CREATE TABLE skiplock.jobs_settings (
    singleton boolean DEFAULT true NOT NULL,
    backoff_base interval DEFAULT '00:00:01'::interval NOT NULL,
    backoff_cap interval DEFAULT '01:00:00'::interval NOT NULL,
    backoff_jitter real DEFAULT 0.25 NOT NULL,
    done_retention interval DEFAULT '1 day'::interval,
    cancelled_retention interval DEFAULT '7 days'::interval,
    dead_retention interval DEFAULT '30 days'::interval,
    shard integer,
    CONSTRAINT jobs_settings_backoff_base_valid CHECK ((backoff_base > '00:00:00'::interval)),
    CONSTRAINT jobs_settings_backoff_cap_valid CHECK (((backoff_cap >= backoff_base) AND (backoff_cap <= '100 years'::interval))),
    CONSTRAINT jobs_settings_backoff_jitter_valid CHECK (((backoff_jitter >= (0)::double precision) AND (backoff_jitter <= (0.25)::double precision))),
    CONSTRAINT jobs_settings_cancelled_retention_valid CHECK (((cancelled_retention >= '00:00:00'::interval) AND (cancelled_retention <= '1000 years'::interval))),
    CONSTRAINT jobs_settings_dead_retention_valid CHECK (((dead_retention >= '00:00:00'::interval) AND (dead_retention <= '1000 years'::interval))),
    CONSTRAINT jobs_settings_done_retention_valid CHECK (((done_retention >= '00:00:00'::interval) AND (done_retention <= '1000 years'::interval))),
    CONSTRAINT jobs_settings_shard_valid CHECK (((shard >= 0) AND (shard <= 1023))),
    CONSTRAINT jobs_settings_singleton CHECK (singleton)
);

COMMENT ON TABLE skiplock.jobs_settings IS 'skiplock settings (one row): retry backoff used by jobs_backoff and jobs_fail; retention per final state used by jobs_maintain (NULL keeps forever).';

COMMENT ON COLUMN skiplock.jobs_settings.shard IS 'skiplock: this database''s shard number (jobs_set_shard); every job id created since has id % 1024 = shard. NULL: not a shard.';

CREATE TABLE skiplock.jobs_unique_keys (
    queue text NOT NULL,
    unique_key text NOT NULL,
    id bigint NOT NULL,
    held_until timestamp with time zone
);

COMMENT ON TABLE skiplock.jobs_unique_keys IS 'skiplock (private): the unique_key of each live job, and of each finished job enqueued with unique_for until its period ends (held_until).';

ALTER TABLE ONLY skiplock.jobs_claims
    ADD CONSTRAINT jobs_claims_pkey PRIMARY KEY (claim_id);

ALTER TABLE skiplock.jobs
    ADD CONSTRAINT jobs_concurrency_key_valid CHECK (((concurrency_key <> ''::text) AND (octet_length(concurrency_key) <= 200))) NOT VALID;

ALTER TABLE ONLY skiplock.jobs_dead_cancelled
    ADD CONSTRAINT jobs_dead_cancelled_pkey PRIMARY KEY (id);

ALTER TABLE ONLY skiplock.jobs_dependencies
    ADD CONSTRAINT jobs_dependencies_pkey PRIMARY KEY (parent_id, child_id);

ALTER TABLE skiplock.jobs
    ADD CONSTRAINT jobs_lease_role_running CHECK (((state = 'running'::skiplock.jobs_state) OR (lease_role IS NULL))) NOT VALID;

ALTER TABLE skiplock.jobs
    ADD CONSTRAINT jobs_meta_valid CHECK ((jsonb_typeof(meta) = 'object'::text)) NOT VALID;

ALTER TABLE ONLY skiplock.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY skiplock.jobs_queues
    ADD CONSTRAINT jobs_queues_pkey PRIMARY KEY (queue);

ALTER TABLE ONLY skiplock.jobs_schedules
    ADD CONSTRAINT jobs_schedules_pkey PRIMARY KEY (name);

ALTER TABLE ONLY skiplock.jobs_settings
    ADD CONSTRAINT jobs_settings_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY skiplock.jobs_topic_subscriptions
    ADD CONSTRAINT jobs_topic_subscriptions_pkey PRIMARY KEY (topic, queue, kind);

ALTER TABLE ONLY skiplock.jobs_unique_keys
    ADD CONSTRAINT jobs_unique_key_idx PRIMARY KEY (queue, unique_key);

CREATE INDEX jobs_claims_expires_idx ON skiplock.jobs_claims USING btree (expires_at);

CREATE INDEX jobs_claims_queue_idx ON skiplock.jobs_claims USING btree (queue);

CREATE INDEX jobs_dead_cancelled_idx ON skiplock.jobs_dead_cancelled USING btree (state, finished_at) INCLUDE (queue);

CREATE INDEX jobs_dependencies_child_idx ON skiplock.jobs_dependencies USING btree (child_id);

CREATE INDEX jobs_dependencies_waiting_idx ON skiplock.jobs_dependencies USING btree (child_id) WHERE (NOT resolved);

CREATE INDEX jobs_queue_starts_idx ON skiplock.jobs_queue_starts USING btree (queue, started_at);

CREATE INDEX jobs_queue_starts_key_idx ON skiplock.jobs_queue_starts USING btree (queue, concurrency_key, started_at);

CREATE INDEX jobs_queued_key_id_idx ON skiplock.jobs_queued USING btree (queue, concurrency_key, id) WHERE (concurrency_key IS NOT NULL);

CREATE INDEX jobs_ready_idx ON skiplock.jobs_queued USING btree (queue, priority, run_at, id);

CREATE INDEX jobs_ready_key_idx ON skiplock.jobs_queued USING btree (queue, concurrency_key, priority, run_at, id) WHERE (concurrency_key IS NOT NULL);

CREATE INDEX jobs_schedules_due_idx ON skiplock.jobs_schedules USING btree (next_run_at) WHERE enabled;

CREATE INDEX jobs_unique_keys_held_idx ON skiplock.jobs_unique_keys USING btree (held_until) WHERE (held_until IS NOT NULL);

CREATE INDEX jobs_workflow_idx ON skiplock.jobs USING btree (workflow_id) WHERE (workflow_id IS NOT NULL);

CREATE TRIGGER jobs_dead_cancelled_insert AFTER INSERT ON skiplock.jobs FOR EACH ROW WHEN ((new.state = ANY (ARRAY['dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state]))) EXECUTE FUNCTION skiplock._jobs_dead_cancelled_sync();

CREATE TRIGGER jobs_dead_cancelled_release AFTER DELETE ON skiplock.jobs FOR EACH ROW WHEN ((old.state = ANY (ARRAY['dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state]))) EXECUTE FUNCTION skiplock._jobs_dead_cancelled_sync();

CREATE TRIGGER jobs_dead_cancelled_sync AFTER UPDATE OF state ON skiplock.jobs FOR EACH ROW WHEN ((((old.state = ANY (ARRAY['dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state])) OR (new.state = ANY (ARRAY['dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state]))) AND ((old.state IS DISTINCT FROM new.state) OR (old.finished_at IS DISTINCT FROM new.finished_at)))) EXECUTE FUNCTION skiplock._jobs_dead_cancelled_sync();

CREATE TRIGGER jobs_dependencies_release AFTER DELETE ON skiplock.jobs FOR EACH ROW WHEN ((old.depends_on IS NOT NULL)) EXECUTE FUNCTION skiplock._jobs_dependencies_release();

CREATE TRIGGER jobs_finished_cascade AFTER UPDATE OF state ON skiplock.jobs FOR EACH ROW WHEN (((new.state = ANY (ARRAY['dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state])) AND (old.state <> ALL (ARRAY['dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state, 'done'::skiplock.jobs_state])) AND (new.has_children OR new.notify_finished))) EXECUTE FUNCTION skiplock._jobs_finished_cascade();

CREATE TRIGGER jobs_queued_release AFTER DELETE ON skiplock.jobs FOR EACH ROW WHEN ((old.state = 'queued'::skiplock.jobs_state)) EXECUTE FUNCTION skiplock._jobs_queued_sync();

CREATE TRIGGER jobs_queued_sync AFTER UPDATE OF state, queue, priority, run_at, concurrency_key ON skiplock.jobs FOR EACH ROW WHEN ((((new.state = 'queued'::skiplock.jobs_state) AND ((old.state <> 'queued'::skiplock.jobs_state) OR ((((old.queue IS DISTINCT FROM new.queue) OR (old.priority IS DISTINCT FROM new.priority)) OR (old.run_at IS DISTINCT FROM new.run_at)) OR (old.concurrency_key IS DISTINCT FROM new.concurrency_key))) AND (NOT ((COALESCE(old.pending_parents, 0) > 0) AND (new.pending_parents = 0)))) OR ((old.state = 'queued'::skiplock.jobs_state) AND (new.state <> ALL (ARRAY['queued'::skiplock.jobs_state, 'running'::skiplock.jobs_state]))))) EXECUTE FUNCTION skiplock._jobs_queued_sync();

CREATE TRIGGER jobs_truncate_sync AFTER TRUNCATE ON skiplock.jobs FOR EACH STATEMENT EXECUTE FUNCTION skiplock._jobs_truncate_sync();

CREATE TRIGGER jobs_unique_key_release AFTER DELETE ON skiplock.jobs FOR EACH ROW WHEN (((old.unique_key IS NOT NULL) AND (old.state <> ALL (ARRAY['done'::skiplock.jobs_state, 'dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state])))) EXECUTE FUNCTION skiplock._jobs_unique_key_sync();

CREATE TRIGGER jobs_unique_key_superseded AFTER UPDATE OF state ON skiplock.jobs FOR EACH ROW WHEN (((new.superseded_by IS NOT NULL) AND (new.unique_key IS NOT NULL) AND (old.state = 'running'::skiplock.jobs_state) AND (new.state = 'queued'::skiplock.jobs_state))) EXECUTE FUNCTION skiplock._jobs_unique_key_superseded();

CREATE TRIGGER jobs_unique_key_sync AFTER UPDATE OF state ON skiplock.jobs FOR EACH ROW WHEN (((new.unique_key IS NOT NULL) AND ((old.state = ANY (ARRAY['done'::skiplock.jobs_state, 'dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state])) <> (new.state = ANY (ARRAY['done'::skiplock.jobs_state, 'dead'::skiplock.jobs_state, 'cancelled'::skiplock.jobs_state]))))) EXECUTE FUNCTION skiplock._jobs_unique_key_sync();

GRANT USAGE ON SCHEMA skiplock TO jobs_producer;
GRANT USAGE ON SCHEMA skiplock TO jobs_worker;
GRANT USAGE ON SCHEMA skiplock TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock._jobs_check_bulk_args(func text, states skiplock.jobs_state[], allowed skiplock.jobs_state[], max_jobs integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_check_fence_arrays(func text, ids bigint[], attempts integer[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_claim_limited(worker text, max_jobs integer, queues text[], lease interval, skip_locked_queues boolean, freed_queues text[], freed_slots integer[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_claim_take(worker text, lease interval, rows tid[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_claim_unkeyed(queue text, max_jobs integer, front integer, passed bigint[], INOUT kept_priority integer, INOUT kept_run_at timestamp with time zone, INOUT kept_id bigint, OUT rows tid[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_claims_release(claim_ids bigint[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_completion_deletes() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_cron_field(func text, cron text, field text, spec text, lo integer, hi integer, names text[], names_base integer, star_hi integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_cron_instant(local timestamp without time zone, timezone text) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_cron_latest(func text, cron text, timezone text, "from" timestamp with time zone, upto timestamp with time zone) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_cron_next(func text, cron text, after timestamp with time zone, timezone text) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_cron_parse(func text, cron text, OUT minutes integer[], OUT hours integer[], OUT doms integer[], OUT months integer[], OUT dows integer[], OUT dom_restricted boolean, OUT dow_restricted boolean, OUT time_wildcard boolean, OUT every_seconds bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_cron_timezone(func text, timezone text) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_dead_cancelled_sync() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_dependencies_release() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_enqueue_child(kind text, payload jsonb, queue text, run_at timestamp with time zone, priority integer, max_attempts integer, unique_key text, concurrency_key text, meta jsonb, notify boolean, parents bigint[], on_parent_failure text, notify_finished boolean, id bigint, workflow_id bigint, workflow_step text, unique_for interval) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_enqueue_duplicate(queue text, unique_key text, on_duplicate text, new_id bigint, payload jsonb, run_at timestamp with time zone, priority integer, max_attempts integer, notify boolean, kind text, caller text, kind_parameter text, OUT id bigint, OUT not_before timestamp with time zone) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_errors_append(errors jsonb, entry jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_finished(ids bigint[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_finished_cascade() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_invalid(func text, param text, problem text) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_parent_results(workflow_id bigint, parents bigint[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_prunable(id bigint, workflow_id bigint, has_children boolean, cutoff timestamp with time zone) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_queued_sync() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_revive(ids bigint[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_truncate_sync() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_unique_key_superseded() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock._jobs_unique_key_sync() FROM PUBLIC;

REVOKE ALL ON FUNCTION skiplock.jobs_backoff(attempt integer) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_backoff(attempt integer) TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_backoff(attempt integer) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_cancel(id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_cancel(id bigint) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_cancel(id bigint, attempt integer, error text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_cancel(id bigint, attempt integer, error text) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_cancel_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_cancel_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_cancel_workflow(workflow_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_cancel_workflow(workflow_id bigint) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_checkpoint(id bigint, attempt integer, step text, value jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_checkpoint(id bigint, attempt integer, step text, value jsonb) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_claim(worker text, max_jobs integer, queues text[], lease interval) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_claim(worker text, max_jobs integer, queues text[], lease interval) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_complete(id bigint, attempt integer, result jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_complete(id bigint, attempt integer, result jsonb) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_complete_and_claim(worker text, ids bigint[], attempts integer[], max_jobs integer, queues text[], lease interval, results jsonb[]) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_complete_and_claim(worker text, ids bigint[], attempts integer[], max_jobs integer, queues text[], lease interval, results jsonb[]) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_complete_many(ids bigint[], attempts integer[], results jsonb[]) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_complete_many(ids bigint[], attempts integer[], results jsonb[]) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_cron_next(cron text, after timestamp with time zone, timezone text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_cron_next(cron text, after timestamp with time zone, timezone text) TO jobs_producer;
GRANT ALL ON FUNCTION skiplock.jobs_cron_next(cron text, after timestamp with time zone, timezone text) TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_cron_next(cron text, after timestamp with time zone, timezone text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_delete_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_delete_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_enqueue(kind text, payload jsonb, queue text, run_at timestamp with time zone, priority integer, max_attempts integer, unique_key text, concurrency_key text, meta jsonb, notify boolean, depends_on bigint[], on_parent_failure text, notify_finished boolean, on_duplicate text, unique_for interval) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_enqueue(kind text, payload jsonb, queue text, run_at timestamp with time zone, priority integer, max_attempts integer, unique_key text, concurrency_key text, meta jsonb, notify boolean, depends_on bigint[], on_parent_failure text, notify_finished boolean, on_duplicate text, unique_for interval) TO jobs_producer;

REVOKE ALL ON FUNCTION skiplock.jobs_enqueue_many(kinds text[], payloads jsonb[], queues text[], run_ats timestamp with time zone[], priorities integer[], max_attempts integer[], unique_keys text[], concurrency_keys text[], metas jsonb[], notify boolean, on_duplicates text[], unique_fors interval[]) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_enqueue_many(kinds text[], payloads jsonb[], queues text[], run_ats timestamp with time zone[], priorities integer[], max_attempts integer[], unique_keys text[], concurrency_keys text[], metas jsonb[], notify boolean, on_duplicates text[], unique_fors interval[]) TO jobs_producer;

REVOKE ALL ON FUNCTION skiplock.jobs_enqueue_workflow(steps jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_enqueue_workflow(steps jsonb) TO jobs_producer;

REVOKE ALL ON FUNCTION skiplock.jobs_fail(id bigint, attempt integer, error text, retry_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_fail(id bigint, attempt integer, error text, retry_at timestamp with time zone) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_get(id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_get(id bigint) TO jobs_producer;
GRANT ALL ON FUNCTION skiplock.jobs_get(id bigint) TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_get(id bigint) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_heartbeat(id bigint, attempt integer, lease interval) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_heartbeat(id bigint, attempt integer, lease interval) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_heartbeat_many(ids bigint[], attempts integer[], lease interval) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_heartbeat_many(ids bigint[], attempts integer[], lease interval) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_inspect(id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_inspect(id bigint) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_list(state skiplock.jobs_state, queue text, kind text, max_jobs integer, before_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_list(state skiplock.jobs_state, queue text, kind text, max_jobs integer, before_id bigint) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_maintain(max_jobs integer) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_maintain(max_jobs integer) TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_maintain(max_jobs integer) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_metrics() FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_metrics() TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_metrics() TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_next_start(queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_next_start(queue text) TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_next_start(queue text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_notify(queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_notify(queue text) TO jobs_producer;

REVOKE ALL ON FUNCTION skiplock.jobs_pause(queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_pause(queue text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_progress(id bigint, attempt integer, progress jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_progress(id bigint, attempt integer, progress jsonb) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_prune(older_than interval, include_dead boolean, max_jobs integer) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_prune(older_than interval, include_dead boolean, max_jobs integer) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_publish(topic text, payload jsonb, run_at timestamp with time zone, priority integer, max_attempts integer, concurrency_key text, meta jsonb, notify boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_publish(topic text, payload jsonb, run_at timestamp with time zone, priority integer, max_attempts integer, concurrency_key text, meta jsonb, notify boolean) TO jobs_producer;

REVOKE ALL ON FUNCTION skiplock.jobs_queue_limited(queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_queue_limited(queue text) TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_queue_limited(queue text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_requeue_expired() FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_requeue_expired() TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_requeue_expired() TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_result(id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_result(id bigint) TO jobs_producer;
GRANT ALL ON FUNCTION skiplock.jobs_result(id bigint) TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_result(id bigint) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_resume(queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_resume(queue text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_retry(id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_retry(id bigint) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_retry_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_retry_many(ids bigint[], queue text, kind text, states skiplock.jobs_state[], max_jobs integer) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_schedule(name text, cron text, kind text, payload jsonb, queue text, timezone text, priority integer, max_attempts integer, enabled boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_schedule(name text, cron text, kind text, payload jsonb, queue text, timezone text, priority integer, max_attempts integer, enabled boolean) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_schedule_run(name text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_schedule_run(name text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_schedule_set_enabled(name text, enabled boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_schedule_set_enabled(name text, enabled boolean) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_schedule_tick() FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_schedule_tick() TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_schedule_tick() TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_set_concurrency(queue text, max_running integer, per_key integer, fair boolean, ordered boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_set_concurrency(queue text, max_running integer, per_key integer, fair boolean, ordered boolean) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_set_rate_limit(queue text, max_starts integer, per interval, per_key boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_set_rate_limit(queue text, max_starts integer, per interval, per_key boolean) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_set_shard(shard integer) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_set_shard(shard integer) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_shard() FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_shard() TO jobs_producer;
GRANT ALL ON FUNCTION skiplock.jobs_shard() TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_shard() TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_snooze(id bigint, attempt integer, run_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_snooze(id bigint, attempt integer, run_at timestamp with time zone) TO jobs_worker;

REVOKE ALL ON FUNCTION skiplock.jobs_stats() FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_stats() TO jobs_worker;
GRANT ALL ON FUNCTION skiplock.jobs_stats() TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_subscribe(topic text, queue text, kind text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_subscribe(topic text, queue text, kind text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_subscriptions(topic text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_subscriptions(topic text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_unschedule(name text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_unschedule(name text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_unsubscribe(topic text, queue text, kind text) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_unsubscribe(topic text, queue text, kind text) TO jobs_admin;

REVOKE ALL ON FUNCTION skiplock.jobs_workflow(workflow_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION skiplock.jobs_workflow(workflow_id bigint) TO jobs_admin;

GRANT SELECT ON TABLE skiplock.jobs_queues TO jobs_admin;

GRANT SELECT ON TABLE skiplock.jobs_schedules TO jobs_admin;

GRANT SELECT,UPDATE ON TABLE skiplock.jobs_settings TO jobs_admin;
