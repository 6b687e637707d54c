-- jobs_enqueue_many: adds many jobs in one call and returns their ids in input order.
--
-- Promises: the set-based form of jobs_enqueue, with the same rules per job. kinds gives the
--           number of jobs; every other array is either NULL (each job takes the default:
--           payload '{}', queue 'default', run_at now(), priority 0, max_attempts 5, no
--           unique_key, no concurrency_key, no meta, on_duplicate 'keep', no unique_for) or has
--           exactly as many elements as kinds. metas and unique_fors may hold NULL elements
--           (no meta, no unique_for for that job).
--           Row i of the result is the id for input i: a new job, or the job that stands for
--           it by jobs_enqueue's rules for on_duplicates[i] and unique_fors[i] (the live job
--           holding its queue and unique_key, that job replaced in place, or a finished job
--           still in its unique_for period), also when an earlier element of the same call
--           took the key: the elements act in input order, so with 'replace' the last
--           element of a key gives the job its fields.
--           One NOTIFY on jobs_ready per distinct queue that got a new job ready now; none
--           at all with notify => false (see jobs_enqueue: only for a caller that makes sure
--           a worker hears about the jobs another way, such as jobs_notify after commit).
--           All or nothing: a bad element raises and inserts no job of the call.
-- Locks:    inserts rows; with unique_keys, may briefly wait on concurrent inserts of a key
--           (keys are inserted in (queue, unique_key) order, so two batches cannot deadlock);
--           with on_duplicates 'replace', the jobs replaced (their jobs_queued rows, then
--           their jobs rows, as a claim takes them), in the order of their ids, as
--           jobs_complete_many locks its jobs.
-- States:   new jobs in queued.
-- Time:     now() (transaction start).
-- Errors:   22023 naming the parameter and element, e.g. 'kinds[3] must be ...', for the
--           same bad values jobs_enqueue rejects (on_duplicates[i], unique_fors[i] included), for multidimensional arrays, for arrays
--           whose length differs from kinds, and for more than 100000 jobs in one call.
--           Arrays may start at any index; element order is what counts. 22023 when notify
--           is NULL.
CREATE OR REPLACE FUNCTION jobs_enqueue_many(
    kinds         text[],
    payloads      jsonb[]       DEFAULT NULL,
    queues        text[]        DEFAULT NULL,
    run_ats       timestamptz[] DEFAULT NULL,
    priorities    integer[]     DEFAULT NULL,
    max_attempts  integer[]     DEFAULT NULL,
    unique_keys   text[]        DEFAULT NULL,
    concurrency_keys text[]     DEFAULT NULL,
    metas         jsonb[]       DEFAULT NULL,
    notify        boolean       DEFAULT true,
    on_duplicates text[]        DEFAULT NULL,
    unique_fors   interval[]    DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
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

COMMENT ON FUNCTION jobs_enqueue_many(text[], jsonb[], text[], timestamptz[], integer[], integer[], text[], text[], jsonb[], boolean,
                                       text[], interval[]) IS
    'skiplock: adds many jobs in one call (arrays indexed alike; NULL array = default for all) and returns their ids in input order.';
