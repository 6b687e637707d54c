-- _jobs_claim_unkeyed: the ready jobs without a concurrency_key that a key-walking claim
-- (_jobs_claim_limited: fair, per_key, ordered or rate_per_key) may take from a queue.
--
-- Promises: returns in rows the jobs_queued rows (ctids) of up to max_jobs ready jobs of
--           queue without a key and not in passed, best first by (priority, run_at, id),
--           from two looks at most. jobs_ready_idx has no key column and no index of the
--           jobs without a key exists (so that they cost nothing to enqueue), so the looks
--           are bounded walks of jobs_ready_idx:
--           1. the queue's best front ready jobs (a job there is found at once, whatever
--              was kept);
--           2. when none of those is one to return and look 1 saw all front of them (there
--              may be more), the next 1,000 ready jobs from the kept position (kept_priority,
--              kept_run_at, kept_id; NULL: from where look 1 stopped), or from where look 1
--              stopped if that is further on.
--           The kept position that comes back is where the next call's look 2 starts: the
--           start of this one's when it found jobs (the jobs before them have keys), the
--           last job it looked at when it saw 1,000 without finding any, NULL (the front)
--           when it reached the last ready job; unchanged when look 2 was not needed. So
--           a job without a key behind N ready keyed jobs is found within N / 1,000 + 1
--           calls, and a better one enqueued meanwhile at once.
-- Locks:    none: the caller locks the rows it keeps (FOR UPDATE SKIP LOCKED), under the
--           queue's jobs_queues row lock, which it also needs to write the kept position.
-- States:   none.
-- Time:     now() (transaction start) for readiness.
CREATE OR REPLACE FUNCTION _jobs_claim_unkeyed(
    queue         text,
    max_jobs      integer,
    front         integer,
    passed        bigint[],
    INOUT kept_priority integer,
    INOUT kept_run_at   timestamptz,
    INOUT kept_id       bigint,
    OUT rows      tid[]
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- As _jobs_claim_limited: the walk is the ordered range scan of jobs_ready_idx, whatever the
-- statistics say, and never JIT-compiled.
SET enable_bitmapscan = off
SET enable_seqscan = off
SET jit = off
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

COMMENT ON FUNCTION _jobs_claim_unkeyed(text, integer, integer, bigint[], integer, timestamptz, bigint) IS
    'skiplock (private): the ready jobs without a key a key-walking claim may take, from two bounded looks.';
