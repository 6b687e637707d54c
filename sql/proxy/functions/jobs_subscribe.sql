-- jobs_subscribe (proxy): subscribes a queue and kind to a topic: each later jobs_publish of
-- the topic adds one job of that kind to that queue.
--
-- On the proxy: the subscriptions are the proxy's own (its table jobs_topic_subscriptions,
-- which the proxy's jobs_publish reads); the shards' tables are not touched.
--
-- Promises: returns true when the subscription is new, false when it existed already (then
--           nothing changes: idempotent). Publishes whose subscription read started after
--           this call's transaction committed fan out to it; earlier ones do not (see
--           jobs_publish). Neither the queue nor the kind need to exist anywhere else yet.
-- Locks:    the subscription's row (inserted) until the transaction ends; a concurrent
--           subscribe of the same (topic, queue, kind) waits for it, then returns false.
--           Publishes do not wait for it.
-- States:   none of the jobs.
-- Time:     now() for created_at.
-- Errors:   22023 when topic, queue or kind is NULL, empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_subscribe(topic text, queue text, kind text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
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

COMMENT ON FUNCTION jobs_subscribe(text, text, text) IS
    'skiplock: subscribes a queue and kind to a topic (jobs_publish adds one job for it); true when the subscription is new.';
