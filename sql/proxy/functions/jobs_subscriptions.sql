-- jobs_subscriptions (proxy): lists the subscriptions of one topic or of all.
--
-- On the proxy: the subscriptions are the proxy's own (its table jobs_topic_subscriptions,
-- which the proxy's jobs_publish reads); the shards' tables are not touched.
--
-- Promises: one row per subscription (the columns topic, queue, kind, created_at of the table
--           jobs_topic_subscriptions), ordered by topic, queue, kind (the order in which
--           jobs_publish returns the ids of a topic's jobs); topic NULL lists every topic.
--           One snapshot: the rows are the subscriptions of one moment.
-- Locks:    none.
-- States:   none of the jobs.
-- Time:     none.
-- Errors:   22023 when topic is empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_subscriptions(topic text DEFAULT NULL)
RETURNS SETOF jobs_topic_subscriptions
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
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

COMMENT ON FUNCTION jobs_subscriptions(text) IS
    'skiplock: lists the subscriptions of a topic (or of every topic), by topic, queue and kind.';
