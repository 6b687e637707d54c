-- jobs_requeue_expired: takes back jobs whose lease has expired; returns how many.
--
-- Promises: every running job with lease_expires_at < now() goes back to queued, ready at
--           once, or to dead when its attempts have reached max_attempts. last_error says
--           the lease expired (when, in UTC, whatever the session's TimeZone) and who held
--           it, and the errors history gets the same entry (_jobs_errors_append: the first
--           entry and the newest 99 are kept).
--           The expired attempt stays counted, so the next claim gets a new fencing token
--           and the old holder's complete/fail/heartbeat are refused. Safe to call from many
--           sessions at once: rows another session is changing are skipped (SKIP LOCKED),
--           and a job whose lease was extended or that was completed meanwhile is rechecked
--           and left alone. Cheap when nothing expired (one probe of jobs_running_lease_idx).
--           NOTIFYs jobs_ready for each queue that got a job back, and for each
--           concurrency-limited queue (jobs_queues) whose jobs went dead (slots came back).
-- Locks:    the expired rows, until the caller's transaction ends.
-- States:   running -> queued, or running -> dead (finished_at set); clears lease_expires_at
--           and lease_role.
-- Time:     now() (transaction start).
-- Errors:   none.
CREATE OR REPLACE FUNCTION jobs_requeue_expired()
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_count integer;
    v_woken integer;
BEGIN
    WITH expired AS (
        SELECT j.id
        FROM jobs j
        WHERE j.state = 'running'
          AND j.lease_expires_at < now()
        ORDER BY j.id
        FOR NO KEY UPDATE SKIP LOCKED
    ), requeued AS (
        UPDATE jobs j
        SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'queued' END::jobs_state,
            run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at ELSE now() END,
            finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
            last_error = format('lease expired at %s (held by %s, attempt %s)',
                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                j.lease_holder, j.attempts),
            errors = _jobs_errors_append(j.errors, jsonb_build_object(
                'attempt', j.attempts, 'at', now(),
                'error', format('lease expired at %s (held by %s, attempt %s)',
                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                j.lease_holder, j.attempts),
                'worker', j.lease_holder)),
            lease_expires_at = NULL,
            lease_role = NULL
        -- Through jobs_pkey; a join with expired may be planned as a scan of the whole table.
        WHERE j.id = ANY (ARRAY(SELECT expired.id FROM expired))
          AND j.state = 'running'
          AND j.lease_expires_at < now()
        RETURNING j.queue, j.state
    ), woken AS (
        SELECT pg_notify('jobs_ready', q.queue)
        FROM (SELECT DISTINCT r.queue FROM requeued r
              WHERE r.state = 'queued'
                 -- a dead job of a concurrency-limited queue gives its slot back too
                 OR EXISTS (SELECT FROM jobs_queues q
                            WHERE q.queue = r.queue AND (q.max_running IS NOT NULL OR q.per_key IS NOT NULL))) AS q
    )
    SELECT (SELECT count(*) FROM requeued), (SELECT count(*) FROM woken) INTO v_count, v_woken;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION jobs_requeue_expired() IS
    'skiplock: running jobs whose lease expired go back to queued (or dead when out of attempts); safe to call concurrently; returns the count.';
