-- jobs_publish (proxy): adds one job per subscription of a topic, each on its queue's shard,
-- and returns their ids.
--
-- Promises: the subscriptions are the proxy's (jobs_subscribe through the proxy), read by one
--           statement, so those of one moment, as on one server. The jobs are added by the
--           proxy's jobs_enqueue_many (kinds and queues from the subscriptions, this call's
--           other values for each): each on its queue's shard (pinning new queues), one call
--           per shard, one NOTIFY per queue there. Returns the ids in the order of the
--           subscriptions by queue, then kind; '{}' (not NULL) for a topic without
--           subscribers. As for jobs_enqueue_many through the proxy, each shard's part
--           commits on its own, not in the caller's transaction on the proxy: when one
--           shard's part fails (shard down), the parts already sent to other shards stay
--           enqueued and the call raises that error. The arguments are checked here first,
--           so a bad one enqueues nothing anywhere.
-- Locks:    on the proxy, the new queues' jobs_proxy_queues rows; on the shards, as
--           jobs_enqueue_many.
-- States:   creates queued jobs on the shards.
-- Errors:   22023 as the shard's jobs_publish (the same checks and messages); the shards'
--           errors; PL/Proxy's connection error naming a shard that is down.
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
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_subs record;
    v_n    integer;
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

    v_subs := _jobs_proxy_topic_subscriptions(jobs_publish.topic);
    v_n := cardinality(v_subs.queues);
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
                 kinds            => v_subs.kinds,
                 payloads         => array_fill(jobs_publish.payload, ARRAY[v_n]),
                 queues           => v_subs.queues,
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
    'skiplock proxy: adds one job per subscription of a topic (the proxy''s subscriptions), each on its queue''s shard; returns their ids.';
