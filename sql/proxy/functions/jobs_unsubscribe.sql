-- jobs_unsubscribe (proxy): removes a subscription of a topic.
--
-- On the proxy: the subscriptions are the proxy's own (its table jobs_topic_subscriptions,
-- which the proxy's jobs_publish reads); the shards' tables are not touched.
--
-- Promises: returns true when the subscription existed and this call removed it, false when
--           there was none (then nothing changes). Publishes whose subscription read started
--           after this call's transaction committed no longer fan out to it; a publish that
--           read the subscriptions earlier still adds its job (see jobs_publish), and jobs
--           already published stay: cancel them with jobs_cancel_many if they must not run.
-- Locks:    the subscription's row (deleted) until the transaction ends. Publishes do not
--           wait for it, nor it for them.
-- States:   none of the jobs.
-- Time:     none.
-- Errors:   22023 when topic, queue or kind is NULL, empty or longer than 200 bytes.
CREATE OR REPLACE FUNCTION jobs_unsubscribe(topic text, queue text, kind text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF jobs_unsubscribe.topic IS NULL OR jobs_unsubscribe.topic = '' OR octet_length(jobs_unsubscribe.topic) > 200 THEN
        PERFORM _jobs_invalid('jobs_unsubscribe', 'topic', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_unsubscribe.queue IS NULL OR jobs_unsubscribe.queue = '' OR octet_length(jobs_unsubscribe.queue) > 200 THEN
        PERFORM _jobs_invalid('jobs_unsubscribe', 'queue', 'must be a non-empty string of at most 200 bytes');
    END IF;
    IF jobs_unsubscribe.kind IS NULL OR jobs_unsubscribe.kind = '' OR octet_length(jobs_unsubscribe.kind) > 200 THEN
        PERFORM _jobs_invalid('jobs_unsubscribe', 'kind', 'must be a non-empty string of at most 200 bytes');
    END IF;

    DELETE FROM jobs_topic_subscriptions s
    WHERE s.topic = jobs_unsubscribe.topic
      AND s.queue = jobs_unsubscribe.queue
      AND s.kind = jobs_unsubscribe.kind;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION jobs_unsubscribe(text, text, text) IS
    'skiplock: removes a subscription of a topic; true when one was removed.';
