-- jobs_enqueue: adds one job and returns its id.
--
-- Promises: the job is visible to jobs_claim once the caller's transaction commits and
--           run_at has come; a rolled-back enqueue leaves no job. When run_at <= now() it
--           also NOTIFYs channel jobs_ready with the queue name as payload; NOTIFY is
--           delivered at commit, so a rollback wakes no one.
--           With unique_key: while a job with the same queue and unique_key is waiting, queued or
--           running, returns that job's id and inserts nothing (enforced by the key's row in
--           jobs_unique_keys, constraint jobs_unique_key_idx, so concurrent callers cannot both
--           insert; a caller racing an uncommitted insert of the same key waits for it to
--           commit or roll back). That is on_duplicate 'keep', the default.
--           on_duplicate 'replace' (debounce: with run_at => now() + delay): when the key's
--           job is waiting or queued, its payload, run_at, priority and max_attempts become
--           the given ones and its id comes back (its kind, concurrency_key, meta, unique_for
--           and parents stay; this call's depends_on is not looked at then). When it is
--           running, this job is inserted after it and takes the key: the running job goes on
--           but never comes back to queued (a retry, snooze or expired lease cancels it with
--           last_error 'superseded by job N', see _jobs_unique_key_superseded), so a key has
--           at most one queued job at any time. A claim racing the replace either takes the
--           old fields (the replace then finds the job running) or, if the replace came first,
--           the new ones; see _jobs_enqueue_duplicate. A replace is the same job again: a
--           live holder of another kind is refused (22023 naming kind), never rewritten.
--           unique_for (throttle): the key also stays taken for this long after the job
--           finished (done, dead or cancelled, even if retention or a done_retention of 0
--           deletes the row): meanwhile every enqueue of the key, 'keep' or 'replace' (a
--           finished job is never changed), returns the finished job's id. The first enqueue
--           after the period takes the key, with run_at no earlier than the period's end, so
--           a job of the key starts no earlier than unique_for after the previous one
--           finished: at most one start per period. With 'replace', a running job enqueued
--           with unique_for is not superseded (its id comes back). jobs_maintain removes the
--           ended periods' rows.
--           concurrency_key: jobs of a queue sharing it count together against the queue's
--           per_key limit (jobs_set_concurrency); NULL counts against max_running only.
--           meta: a JSON object stored with the job for tools, not for the handler (the
--           OpenTelemetry package keeps the W3C traceparent there); jobs_claim and jobs_get
--           return it. NULL by default.
--           notify: false sends no NOTIFY at all, so the caller's commit skips PostgreSQL's
--           cluster-wide NOTIFY lock (held across the WAL flush, it makes notifying commits
--           go one at a time). Only for a caller that makes sure a worker hears about the job
--           another way (a jobs_notify after its commit, as the Go driver's throttle does);
--           otherwise an idle worker finds the job only at its next poll. Default true.
--           depends_on: the ids of the job's parents. While one of them is unfinished the
--           job is waiting, and it becomes queued (run_at still applies, workers are
--           notified) in the transaction in which its last parent becomes done (see
--           _jobs_finished). Parents already done count as done. A parent that ends dead or
--           cancelled cancels the job (last_error names the parent; jobs_retry of the parent
--           brings it back to waiting), or, with on_parent_failure 'run', counts as done; a
--           parent already dead or cancelled at enqueue does so at once. Duplicate ids count
--           once; an empty array is no parents. The claim hands the job its parents' results
--           (jobs_claimed.parent_results).
--           notify_finished: when the job becomes done, dead or cancelled, the same
--           transaction NOTIFYs channel jobs_finished with its id, for waiters (jobs_result).
--           Only these jobs notify, so other completions stay off the NOTIFY lock.
-- Locks:    inserts one row; with unique_key, may briefly wait on a concurrent insert. A
--           replace locks the key's job as a claim does (see _jobs_enqueue_duplicate) and may
--           wait for a claim of it to end. With
--           depends_on, the parents' rows (FOR NO KEY UPDATE, in id order, until the caller's
--           transaction ends), so a parent cannot finish unseen between the look at its state
--           and the commit; in REPEATABLE READ, a parent that changed since the snapshot gives
--           40001 (retry the transaction).
-- States:   new job in queued; with depends_on, in waiting (or cancelled, see above).
-- Time:     now() (transaction start) is the default run_at and decides readiness.
-- Errors:   22023 when kind or queue is NULL, empty or longer than 200 bytes, unique_key is
--           empty or longer than 200 bytes, payload is NULL, run_at is NULL or infinite,
--           priority is NULL, max_attempts is NULL or < 1, or concurrency_key is empty or
--           longer than 200 bytes, or meta is not NULL and not a JSON object, or notify is
--           NULL, or depends_on is multidimensional, holds a NULL or an unknown id, or more
--           than 10000 ids, or on_parent_failure is not 'cancel' or 'run', or
--           notify_finished is NULL, or on_duplicate is not 'keep' or 'replace', or is
--           'replace' without a unique_key, or unique_for is <= 0 or longer than 100 years
--           or given without a unique_key, or with 'replace' kind is not the kind of the
--           live job holding the key. Nothing is inserted or changed then.
CREATE OR REPLACE FUNCTION jobs_enqueue(
    kind         text,
    payload      jsonb       DEFAULT '{}',
    queue        text        DEFAULT 'default',
    run_at       timestamptz DEFAULT now(),
    priority     integer     DEFAULT 0,
    max_attempts integer     DEFAULT 5,
    unique_key      text        DEFAULT NULL,
    concurrency_key text        DEFAULT NULL,
    meta            jsonb       DEFAULT NULL,
    notify          boolean     DEFAULT true,
    depends_on        bigint[]  DEFAULT NULL,
    on_parent_failure text      DEFAULT 'cancel',
    notify_finished   boolean   DEFAULT false,
    on_duplicate      text      DEFAULT 'keep',
    unique_for        interval  DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
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

COMMENT ON FUNCTION jobs_enqueue(text, jsonb, text, timestamptz, integer, integer, text, text, jsonb, boolean, bigint[], text, boolean,
                                  text, interval) IS
    'skiplock: adds one job (or returns the live job with the same queue and unique_key) and wakes workers when it is ready now.';
