-- _jobs_queued_sync: keeps jobs_queued in step when a job becomes queued again or a queued
-- job changes otherwise than by a claim (trigger).
--
-- Promises: a job that moves to queued (jobs_fail's retry, jobs_snooze, jobs_requeue_expired,
--           jobs_retry, jobs_retry_many) gets its jobs_queued row; a queued job whose queue,
--           priority, run_at or concurrency_key changes gets its row moved; a queued job that
--           leaves queued otherwise than to running, or is deleted, loses it. Claims (queued
--           -> running) delete the rows they take themselves and do not fire it, nor do
--           enqueues, which insert the row with the job: the hot path pays nothing; nor do
--           the releases of _jobs_finished (waiting -> queued as the last parent is done),
--           which insert the rows of a whole batch in one statement.
-- Locks:    never waits: the job's row is held here, and a claim locks the jobs_queued row
--           first and then waits for the job's, so waiting for the jobs_queued row could
--           deadlock (jobs_cancel of a job that came back to queued while the cancel waited
--           did, tests/isolation/specs/cancel_requeued_claim.spec). A row locked by another
--           session is left to it: a claim deletes the rows it picked whatever it then finds
--           the job to be, and a claim that rolls back leaves a row whose job is no longer
--           queued, which the next claim to reach it deletes.
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
        WHERE q.ctid = ANY (ARRAY(
                SELECT r.ctid
                FROM jobs_queued r
                WHERE (r.queue, r.priority, r.run_at, r.id) = (OLD.queue, OLD.priority, OLD.run_at, OLD.id)
                FOR UPDATE SKIP LOCKED));
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
                   IS DISTINCT FROM (NEW.queue, NEW.priority, NEW.run_at, NEW.concurrency_key))
           -- A release (the last parent done: pending_parents reaches 0): _jobs_finished
           -- inserts the rows of all the jobs it releases in one statement.
           AND NOT (coalesce(OLD.pending_parents, 0) > 0 AND NEW.pending_parents = 0))
          OR (OLD.state = 'queued' AND NEW.state NOT IN ('queued', 'running')))
    EXECUTE FUNCTION _jobs_queued_sync();
DROP TRIGGER IF EXISTS jobs_queued_release ON jobs;
CREATE TRIGGER jobs_queued_release
    AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.state = 'queued')
    EXECUTE FUNCTION _jobs_queued_sync();
