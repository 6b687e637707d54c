-- jobs_publish: adds one job per subscription of a topic (fan-out) and returns their ids.
--
-- Promises: for each subscription of the topic (jobs_subscribe), one job of the
--           subscription's kind in its queue, with this call's payload, run_at, priority,
--           max_attempts, concurrency_key and meta. Each is an ordinary job, added by
--           jobs_enqueue_many with the same rules (one NOTIFY on jobs_ready per queue that got
--           a job ready now, none with notify => false), in the caller's transaction: a
--           rolled-back publish leaves no job, and a committed one commits together with the
--           caller's other writes. Returns the ids in the order of the subscriptions by
--           queue, then kind (as jobs_subscriptions lists them); a topic without
--           subscribers returns an empty array, never NULL.
--           One moment: the subscriptions are read by one statement, so the jobs are those of
--           the subscriptions committed when it started (in READ COMMITTED; in REPEATABLE READ
--           and SERIALIZABLE, those of the transaction's snapshot). A subscribe or unsubscribe
--           committing while a publish runs is wholly before it (the publish fans out as
--           after it, every change of that transaction together) or wholly after it (not
--           seen), never half. No lock is taken on the subscriptions: publishes and
--           subscription changes never wait for each other, and an unsubscribe that commits
--           after a publish's read does not undo the job that publish adds.
-- Locks:    inserts rows (as jobs_enqueue_many).
-- States:   new jobs in queued.
-- Time:     now() (transaction start) is the default run_at and decides readiness.
-- Errors:   22023 when topic is NULL, empty or longer than 200 bytes, or has more than
--           100000 subscriptions (jobs_enqueue_many's limit), payload is NULL, run_at is NULL
--           or infinite, priority is NULL, max_attempts is NULL or < 1, concurrency_key is
--           empty or longer than 200 bytes, meta is not NULL and not a JSON object, or notify
--           is NULL. Nothing is inserted then. The checks do not depend on the topic having
--           subscribers.
CREATE OR REPLACE FUNCTION jobs_publish(
    topic           text,
    payload         jsonb       DEFAULT '{}',
    run_at          timestamptz DEFAULT now(),
    priority        integer     DEFAULT 0,
    max_attempts    integer     DEFAULT 5,
    concurrency_key text        DEFAULT NULL,
    meta            jsonb       DEFAULT NULL,
    notify          boolean     DEFAULT true
)
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
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

COMMENT ON FUNCTION jobs_publish(text, jsonb, timestamptz, integer, integer, text, jsonb, boolean) IS
    'skiplock: adds one job per subscription of a topic (kind and queue from the subscription); returns their ids, empty without subscribers.';
