-- _jobs_queued_sync: keeps jobs_queued in step when a job becomes queued again or a queued
-- job changes otherwise than by a claim (trigger).
--
-- Promises: a job that moves to queued (jobs_fail's retry, jobs_snooze, jobs_requeue_expired,
--           jobs_retry, jobs_retry_many) gets its jobs_queued row; a queued job whose queue,
--           priority, run_at or concurrency_key changes gets its row moved; a queued job that
--           leaves queued otherwise than to running, or is deleted, loses it. Claims (queued
--           -> running) delete the rows they take themselves and do not fire it, nor do
--           enqueues, which insert the row with the job: the hot path pays nothing.
-- Locks:    the jobs_queued row, after the job's row. A function that takes a queued job out
--           of queued deletes its jobs_queued row before touching the job (claims lock in
--           that order), so only a direct UPDATE of a queued job's run_at or priority can wait
--           here on a claim in progress (and, if that claim waits for the job, one of the two
--           fails with a deadlock error and can be retried).
-- States:   none of jobs.
CREATE OR REPLACE FUNCTION _jobs_queued_sync()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    IF OLD.state = 'queued' THEN
        DELETE FROM jobs_queued q
        WHERE (q.queue, q.priority, q.run_at, q.id) = (OLD.queue, OLD.priority, OLD.run_at, OLD.id);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = 'queued' THEN
        INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
        VALUES (NEW.queue, NEW.priority, NEW.run_at, NEW.id, NEW.concurrency_key);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION _jobs_queued_sync() IS
    'skiplock (private): trigger keeping jobs_queued in step with jobs that become queued or change while queued.';

DROP TRIGGER IF EXISTS jobs_queued_sync ON jobs;
CREATE TRIGGER jobs_queued_sync
    AFTER UPDATE OF state, queue, priority, run_at, concurrency_key ON jobs
    FOR EACH ROW
    WHEN ((NEW.state = 'queued'
           AND (OLD.state <> 'queued'
                OR (OLD.queue, OLD.priority, OLD.run_at, OLD.concurrency_key)
                   IS DISTINCT FROM (NEW.queue, NEW.priority, NEW.run_at, NEW.concurrency_key)))
          OR (OLD.state = 'queued' AND NEW.state NOT IN ('queued', 'running')))
    EXECUTE FUNCTION _jobs_queued_sync();
DROP TRIGGER IF EXISTS jobs_queued_release ON jobs;
CREATE TRIGGER jobs_queued_release
    AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.state = 'queued')
    EXECUTE FUNCTION _jobs_queued_sync();
