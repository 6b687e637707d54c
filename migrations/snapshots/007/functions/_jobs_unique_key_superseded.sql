-- _jobs_unique_key_superseded: a job whose unique_key a replace gave to a newer job never
-- comes back to queued (trigger).
--
-- Promises: when an enqueue with on_duplicate 'replace' meets its key's job running, the key
--           moves to the new job and the running one gets superseded_by (see
--           _jobs_enqueue_duplicate). If that running job would then go back to queued
--           (jobs_fail with attempts left, jobs_snooze, jobs_requeue_expired after its lease
--           expired), it ends cancelled instead, with finished_at = now() and last_error
--           'superseded by job N' (also appended to errors): the newer job does its work, and
--           the key never has two queued jobs. The calls report what happened
--           (jobs_fail returns 'cancelled'). A superseded job that jobs_retry brought back
--           and that holds its key again (its key row names it) is queued as usual.
--           Fires only for keyed jobs with superseded_by set (the trigger's WHEN), after the
--           update that queued the job, which it then cancels in the same statement (so the
--           job is never seen queued outside it). An AFTER trigger on purpose: a BEFORE
--           UPDATE row trigger makes PostgreSQL lock every updated row of jobs first, whatever
--           its WHEN says, a WAL record (about 54 bytes) for each claim and completion.
-- Locks:    none beyond the job's row, which the caller holds: a replace moves the key only
--           while holding that row too, so the two cannot pass each other.
-- States:   running -> queued -> cancelled, in the caller's statement.
-- Time:     now() (transaction start).
CREATE OR REPLACE FUNCTION _jobs_unique_key_superseded()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM jobs_unique_keys k
                   WHERE k.queue = NEW.queue AND k.unique_key = NEW.unique_key AND k.id = NEW.id) THEN
        UPDATE jobs j
        SET state = 'cancelled',
            finished_at = now(),
            last_error = format('superseded by job %s', j.superseded_by),
            errors = _jobs_errors_append(j.errors, jsonb_build_object('attempt', j.attempts, 'at', now(),
                                                                      'error', format('superseded by job %s', j.superseded_by)))
        WHERE j.id = NEW.id AND j.state = 'queued';
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION _jobs_unique_key_superseded() IS
    'skiplock (private): trigger cancelling a job superseded by a replace instead of queueing it again.';

DROP TRIGGER IF EXISTS jobs_unique_key_superseded ON jobs;
CREATE TRIGGER jobs_unique_key_superseded
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.superseded_by IS NOT NULL AND NEW.unique_key IS NOT NULL
          AND OLD.state = 'running' AND NEW.state = 'queued')
    EXECUTE FUNCTION _jobs_unique_key_superseded();
