-- _jobs_proxy_topic_subscriptions: the subscriptions of a topic on the proxy, for its
-- jobs_publish (which runs as its caller, so that the caller reaches the shards as itself,
-- and may not read the table).
--
-- Promises: the topic's (queue, kind) pairs by queue, then kind, read by one statement (one
--           snapshot: the subscriptions of one moment). Nothing for an unknown topic.
-- Locks:    none. States: none of the jobs.
CREATE OR REPLACE FUNCTION _jobs_proxy_topic_subscriptions(topic text, OUT queues text[], OUT kinds text[])
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
    SELECT coalesce(array_agg(s.queue ORDER BY s.queue, s.kind), '{}'),
           coalesce(array_agg(s.kind ORDER BY s.queue, s.kind), '{}')
    FROM jobs_topic_subscriptions s
    WHERE s.topic = _jobs_proxy_topic_subscriptions.topic;
$$;

COMMENT ON FUNCTION _jobs_proxy_topic_subscriptions(text) IS
    'skiplock proxy (private): the (queue, kind) subscriptions of a topic, for jobs_publish.';
