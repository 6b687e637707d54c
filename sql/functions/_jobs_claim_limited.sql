-- _jobs_claim_limited: jobs_claim when a requested queue is paused, limited or shaped.
--
-- Promises: what jobs_claim promises (its arguments are already checked), and that no claim
--           takes a job of a paused queue or takes a queue over its limits:
--           - max_running: at most that many jobs of the queue are running at any instant;
--           - per_key: at most that many running jobs of the queue share a concurrency_key
--             (jobs without a key count against max_running only);
--           - max_starts per per: in any window of length per, at most max_starts jobs of
--             the queue are claimed; with rate_per_key, at most max_starts jobs of each
--             concurrency_key (jobs without a key being one group of their own);
--           - ordered: a key's jobs run one at a time in id order: a key is claimable only
--             while none of its jobs runs and its lowest-id queued job (its head, whatever
--             its run_at or priority) is ready; then the head is the job taken. A head queued
--             for its retry (jobs_fail, jobs_snooze, jobs_requeue_expired) holds back the
--             key's later jobs until it is done, dead or cancelled. Jobs without a key are
--             not ordered. Ids are drawn at insert: of two enqueues of a key in overlapping
--             transactions, the lower id runs first if it commits before the key's head is
--             looked at; if it commits later, after a higher id already started, it runs
--             after that one (ordered by id among the jobs queued at each claim);
--           - fair: the ready jobs are taken round-robin across keys, one job per key per
--             turn, priority, run_at and id ordering within a key: the claim walks the keys
--             of the queue's queued jobs in key order from just after the key the previous
--             claim took last (the queue's rr_cursor, written under the same row lock), the
--             group of jobs without a key after the last key, wrapping around once, taking
--             the best job of each key with room; a batch that one turn does not fill takes
--             the rest in equal shares of the keys that gave a job. A key with 100,000 ready
--             jobs cannot starve one with 10: each turn gives the small key one. The walk is
--             bounded: after 1,000 keys that gave nothing (no room, or no ready job, e.g. all
--             of a key's jobs in the future) the claim stops and sets rr_cursor to the key it
--             looked at last, so the next claim goes on from there and every key still gets
--             its turn; a ready key behind K such keys is reached within K / 1,000 + 1
--             claims, and a claim may take fewer jobs than are ready. The group of jobs
--             without a key is found whatever the keyed backlog ahead of it: at its turn the
--             claim looks at the queue's best (room + taken + 100) ready jobs and, when none
--             of those lacks a key and there are more, at the next 1,000 ready jobs from
--             where the previous such look stopped (rr_unkeyed_*, written under the same
--             lock; from the front again after the last ready job), so a job without a key
--             behind N ready keyed jobs is taken within N / 1,000 + 1 claims that reach the
--             group's turn, and a better one enqueued meanwhile at once. Without
--             fair, a queue with per_key, ordered or rate_per_key takes the best jobs (by
--             priority, run_at, id) among the keys with room.
--           All of these hold together (the key walk computes each key's room as the least
--           of what per_key, ordered and the key's rate budget leave, within max_running and
--           max_jobs).
--           Exact, without counters: a limited queue's jobs_queues row is locked FOR UPDATE
--           (in queue-name order across queues, so claimers cannot deadlock) until the
--           claiming transaction ends, so claims of the queue take turns; in READ COMMITTED
--           every statement after the lock takes a new snapshot and so sees the committed
--           claims of the previous holder. The queue's running jobs are then counted from its
--           jobs_claims rows (the sum of their running counts; per key, their listed jobs
--           still running): a slot comes back in the same commit as its job leaves running,
--           by any path (complete, complete_many, fail, snooze, cancel, requeue_expired),
--           each of which lowers the count (_jobs_claims_release). Rate limits keep a sliding log (jobs_queue_starts) of the
--           last window's starts under the same lock. A limit below the running count
--           (lowered meanwhile) gives no jobs until running falls below it.
--           Order without head-of-line blocking: with per_key, ordered or rate_per_key, the
--           best jobs of each key that has room are candidates (one probe of
--           jobs_ready_key_idx per key; for ordered, of jobs_queued_key_id_idx for its head),
--           so a key at its limit holds back no other key, and one call never takes a key over
--           its room. Jobs without a key in such a queue that is not fair (a fair queue's
--           turn: above) are looked for among the queue's best (room + 100) ready jobs and,
--           when none of those lacks a key, among the next 1,000 from where the previous
--           such look stopped (rr_unkeyed_*, as in the fair turn), so one behind N ready jobs
--           of held-back keys is found within N / 1,000 + 1 claims; but only ahead
--           of the last keyed candidate when there are enough keyed ones (then it is among
--           the room + 100 best). The bounds keep the claim from walking every job of a key
--           at its limit (there is no index of the jobs without a key, so that they cost
--           nothing to enqueue), at the price that an unkeyed job is taken later than its
--           rank says. Give every job of such a queue a key to avoid that. Queues without
--           limits in the same call
--           are claimed as jobs_claim does.
--           Cost: a queue with max_running or a queue-wide rate alone costs one ordered range
--           scan, as the fast path, plus the count of its running jobs (the sum over its
--           jobs_claims rows). The key walk counts the queue's running jobs per key once per
--           claim (one jobs_pkey probe per running job of the queue, for per_key and ordered
--           only); a fair claim then probes only the keys it walks past until its budget is
--           taken (plus the unkeyed group once per turn: up to room + taken + 1,100 entries
--           of jobs_ready_idx), so it costs in proportion to the jobs it takes and the keys
--           that give nothing it passes, at most 1,000 of those. One that is not fair looks
--           first at the queue's best (budget + 100) ready jobs of keys that their running
--           jobs leave room (passing over the jobs of the others, which costs in proportion
--           to them; an ordered key's head is probed only for the jobs that get that far),
--           which decides exactly when budget of them are let in or they are all such jobs;
--           only otherwise (keys held back by a head waiting for its retry, or by their rate,
--           filling that look) does it probe every key of the queue's queued jobs.
--           skip_locked_queues (jobs_complete_and_claim's claim): a limited queue whose
--           jobs_queues row another transaction holds (a claim of the queue, an operator's
--           open jobs_set_concurrency, jobs_pause, jobs_set_rate_limit or jobs_resume) is not
--           waited for, so the call never waits on a lock; the other requested queues are
--           claimed as usual. Such a queue gives nothing, except a slot handover: when the
--           caller's own transaction has just taken freed_slots[i] jobs of queue
--           freed_queues[i] out of running (its completions), and the queue has max_running
--           and no other limit (and is not paused, as this transaction sees it), up to that
--           many of its jobs are claimed without the row, within max_running as counted
--           here. Exact all the same: the queue's running total does not grow by such a claim
--           (it takes at most what the same commit gives back), and a holder of the row
--           counts either both the completions and the handover or neither, whichever side of
--           this commit its snapshot is; handovers of other transactions each take at most
--           their own. Not with per_key (the freed and the taken jobs' keys would have to
--           match) nor a rate limit (every start goes into the log, which only the row's
--           holder writes), nor fair sharing (the cursor) or ordered keys (which job is a
--           key's head, and whether the key runs, need the row). Without skip_locked_queues
--           (jobs_claim) the call waits for such a row, so a queue is skipped only when it is
--           paused or at a limit.
-- Locks:    FOR UPDATE on the jobs_queues rows of the limited queues requested (with
--           skip_locked_queues only those no other transaction holds, SKIP LOCKED), and
--           row locks on the picked jobs_queued rows (candidates not chosen too, all taken
--           SKIP LOCKED) and the claimed jobs, until the caller's transaction ends. Waits for nothing with
--           skip_locked_queues; without it, waits only for the jobs_queues rows.
-- States:   queued -> running (or, at attempts 2147483647, dead), as jobs_claim (lease_role =
--           session_user too); appends to jobs_queue_starts (with the job's concurrency_key)
--           and trims from it the starts older than one window; sets a fair queue's
--           jobs_queues.rr_cursor to the key it took (or, stopped by the bound, looked at)
--           last, and a key-walking queue's rr_unkeyed_* to where its look for jobs without a
--           key stopped.
-- Time:     now() (transaction start), as jobs_claim; rate-limited starts are logged at
--           now() too. A claim whose now() is a whole window (per) behind the queue's
--           latest logged start (its transaction began long before it claimed) takes
--           nothing from that queue: its retry in a new transaction does.
-- Errors:   0A000 when a requested queue has a limit and the transaction is REPEATABLE READ
--           or SERIALIZABLE: its snapshot predates the previous claimer's commit, so the
--           count would be stale and the limit could be exceeded.
CREATE OR REPLACE FUNCTION _jobs_claim_limited(
    worker   text,
    max_jobs integer,
    queues   text[],
    lease    interval,
    skip_locked_queues boolean DEFAULT false,
    freed_queues       text[]  DEFAULT '{}',
    freed_slots        integer[] DEFAULT '{}'
)
RETURNS SETOF jobs_claimed
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- jobs_queued's statistics lag its size (empty at one ANALYZE, a backlog of a million by the
-- next): estimating a few rows, the planner would read every queued job of the queue with a
-- bitmap or sequential scan and sort them, for each claim. Without either, the pick is the
-- ordered range scan of jobs_ready_idx that stops at max_jobs, whatever the statistics say.
SET enable_bitmapscan = off
SET enable_seqscan = off
-- With sequential scans off, a condition that no index serves (queues NULL: every queue) is
-- costed at 1e10, far above jit_above_cost, so every call would JIT-compile its statements
-- (about 100 ms each time where JIT is available).
SET jit = off
-- Custom plans where they cost less (the default; jobs_claim, which calls it, forces generic
-- plans for its own statements): the key walk's statements depend on the queue's settings.
SET plan_cache_mode = auto
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

COMMENT ON FUNCTION _jobs_claim_limited(text, integer, text[], interval, boolean, text[], integer[]) IS
    'skiplock (private): jobs_claim for paused or limited queues; exact limits under the jobs_queues row lock.';
