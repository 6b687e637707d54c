-- jobs_enqueue_many (proxy): adds many jobs, each on its queue's shard, and returns their
-- ids in the order of the arrays.
--
-- Promises: splits the arrays by queue shard (_jobs_proxy_queue_shard, pinning new queues;
--           queues NULL means every job goes to 'default') and calls the shard's
--           jobs_enqueue_many once per shard with that shard's elements, in their order, so
--           unique keys and per-queue order mean what they mean on one server. Returns the
--           ids in the order of kinds, as the shard's function does. Each shard's part
--           commits on its own: when one shard's part fails (bad element, shard down), the
--           parts already sent to other shards stay enqueued and the call raises that error.
--           All elements go through the proxy's own checks first (array lengths), so a
--           malformed call enqueues nothing anywhere.
--           An element's error names its index within its shard's part, not the whole call.
-- Locks:    as the shard's function; on the proxy, the new queues' jobs_proxy_queues rows.
-- States:   creates queued jobs on the shards.
-- Errors:   22023 naming the array whose length differs from kinds, or kinds NULL; the
--           shards' errors; PL/Proxy's connection error naming a shard that is down.
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
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_n integer;
    v_shards integer[];
    v_shard integer;
    v_pos integer[];
    v_ids bigint[];
    v_out bigint[];
    i integer;
BEGIN
    IF jobs_enqueue_many.kinds IS NULL OR jobs_enqueue_many.queues IS NULL THEN
        -- One shard holds every job: the 'default' queue's (or shard 0's, which raises the
        -- shard's 22023 for kinds NULL).
        v_shard := CASE WHEN jobs_enqueue_many.kinds IS NULL THEN 0
                        ELSE _jobs_proxy_queue_shard('jobs_enqueue_many', 'default', true) END;
        RETURN QUERY SELECT * FROM _jobs_proxy_enqueue_many_on(v_shard, kinds, payloads, queues, run_ats,
            priorities, max_attempts, unique_keys, concurrency_keys, metas, notify, on_duplicates, unique_fors);
        RETURN;
    END IF;
    v_n := coalesce(cardinality(kinds), 0);
    IF array_ndims(kinds) > 1 THEN
        PERFORM _jobs_invalid('jobs_enqueue_many', 'kinds', 'must be a one-dimensional array');
    END IF;
    IF array_ndims(queues) > 1 OR cardinality(queues) <> v_n THEN
        PERFORM _jobs_invalid('jobs_enqueue_many', 'queues', 'must have as many elements as kinds');
    END IF;
    IF (payloads IS NOT NULL AND cardinality(payloads) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'payloads', 'must have as many elements as kinds'); END IF;
    IF (run_ats IS NOT NULL AND cardinality(run_ats) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'run_ats', 'must have as many elements as kinds'); END IF;
    IF (priorities IS NOT NULL AND cardinality(priorities) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'priorities', 'must have as many elements as kinds'); END IF;
    IF (max_attempts IS NOT NULL AND cardinality(max_attempts) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'max_attempts', 'must have as many elements as kinds'); END IF;
    IF (unique_keys IS NOT NULL AND cardinality(unique_keys) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'unique_keys', 'must have as many elements as kinds'); END IF;
    IF (concurrency_keys IS NOT NULL AND cardinality(concurrency_keys) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'concurrency_keys', 'must have as many elements as kinds'); END IF;
    IF (metas IS NOT NULL AND cardinality(metas) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'metas', 'must have as many elements as kinds'); END IF;
    IF (on_duplicates IS NOT NULL AND cardinality(on_duplicates) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'on_duplicates', 'must have as many elements as kinds'); END IF;
    IF (unique_fors IS NOT NULL AND cardinality(unique_fors) <> v_n) THEN PERFORM _jobs_invalid('jobs_enqueue_many', 'unique_fors', 'must have as many elements as kinds'); END IF;

    -- Rebased to start at 1 (the shard's function takes arrays starting at any index).
    kinds := ARRAY(SELECT x FROM unnest(kinds) WITH ORDINALITY AS u(x, n) ORDER BY n);
    queues := ARRAY(SELECT x FROM unnest(queues) WITH ORDINALITY AS u(x, n) ORDER BY n);
    payloads := CASE WHEN payloads IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(payloads) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    run_ats := CASE WHEN run_ats IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(run_ats) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    priorities := CASE WHEN priorities IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(priorities) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    max_attempts := CASE WHEN max_attempts IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(max_attempts) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    unique_keys := CASE WHEN unique_keys IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(unique_keys) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    concurrency_keys := CASE WHEN concurrency_keys IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(concurrency_keys) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    metas := CASE WHEN metas IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(metas) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    on_duplicates := CASE WHEN on_duplicates IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(on_duplicates) WITH ORDINALITY AS u(x, n) ORDER BY n) END;
    unique_fors := CASE WHEN unique_fors IS NULL THEN NULL ELSE ARRAY(SELECT x FROM unnest(unique_fors) WITH ORDINALITY AS u(x, n) ORDER BY n) END;

    v_shards := ARRAY(SELECT _jobs_proxy_queue_shard('jobs_enqueue_many', q, true)
                      FROM unnest(queues) WITH ORDINALITY AS u(q, n) ORDER BY n);
    v_out := array_fill(NULL::bigint, ARRAY[v_n]);
    FOR v_shard IN SELECT DISTINCT s FROM unnest(v_shards) AS s ORDER BY s LOOP
        v_pos := ARRAY(SELECT n::integer FROM unnest(v_shards) WITH ORDINALITY AS u(s, n)
                       WHERE s = v_shard ORDER BY n);
        v_ids := ARRAY(SELECT * FROM _jobs_proxy_enqueue_many_on(v_shard,
            ARRAY(SELECT kinds[p] FROM unnest(v_pos) AS p),
            CASE WHEN payloads IS NULL THEN NULL ELSE ARRAY(SELECT payloads[p] FROM unnest(v_pos) AS p) END,
            ARRAY(SELECT queues[p] FROM unnest(v_pos) AS p),
            CASE WHEN run_ats IS NULL THEN NULL ELSE ARRAY(SELECT run_ats[p] FROM unnest(v_pos) AS p) END,
            CASE WHEN priorities IS NULL THEN NULL ELSE ARRAY(SELECT priorities[p] FROM unnest(v_pos) AS p) END,
            CASE WHEN max_attempts IS NULL THEN NULL ELSE ARRAY(SELECT max_attempts[p] FROM unnest(v_pos) AS p) END,
            CASE WHEN unique_keys IS NULL THEN NULL ELSE ARRAY(SELECT unique_keys[p] FROM unnest(v_pos) AS p) END,
            CASE WHEN concurrency_keys IS NULL THEN NULL ELSE ARRAY(SELECT concurrency_keys[p] FROM unnest(v_pos) AS p) END,
            CASE WHEN metas IS NULL THEN NULL ELSE ARRAY(SELECT metas[p] FROM unnest(v_pos) AS p) END,
            notify,
            CASE WHEN on_duplicates IS NULL THEN NULL ELSE ARRAY(SELECT on_duplicates[p] FROM unnest(v_pos) AS p) END,
            CASE WHEN unique_fors IS NULL THEN NULL ELSE ARRAY(SELECT unique_fors[p] FROM unnest(v_pos) AS p) END));
        FOR i IN 1 .. coalesce(cardinality(v_pos), 0) LOOP
            v_out[v_pos[i]] := v_ids[i];
        END LOOP;
    END LOOP;
    RETURN QUERY SELECT x FROM unnest(v_out) WITH ORDINALITY AS u(x, n) ORDER BY n;
END;
$$;
