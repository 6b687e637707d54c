-- _jobs_dead_cancelled_sync: keeps jobs_dead_cancelled in step with the dead and cancelled
-- jobs (trigger).
--
-- Promises: a job that becomes (or is inserted) dead or cancelled gets its row (state, queue, finished_at); a
--           job that leaves those states (jobs_retry) or is deleted loses it. Fires only for
--           updates that set state from or to dead or cancelled, and deletes of such jobs (the
--           triggers' WHEN), so claims and completions cost it nothing.
-- Locks:    the row. States: none of jobs.
CREATE OR REPLACE FUNCTION _jobs_dead_cancelled_sync()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.state NOT IN ('dead', 'cancelled')) THEN
        DELETE FROM jobs_dead_cancelled d WHERE d.id = OLD.id;
    ELSE
        INSERT INTO jobs_dead_cancelled (id, state, queue, finished_at)
        VALUES (NEW.id, NEW.state, NEW.queue, NEW.finished_at)
        ON CONFLICT (id) DO UPDATE SET state = excluded.state, finished_at = excluded.finished_at;
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION _jobs_dead_cancelled_sync() IS
    'skiplock (private): trigger keeping jobs_dead_cancelled in step with the dead and cancelled jobs.';

DROP TRIGGER IF EXISTS jobs_dead_cancelled_sync ON jobs;
CREATE TRIGGER jobs_dead_cancelled_sync
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN ((OLD.state IN ('dead', 'cancelled') OR NEW.state IN ('dead', 'cancelled'))
          AND (OLD.state, OLD.finished_at) IS DISTINCT FROM (NEW.state, NEW.finished_at))
    EXECUTE FUNCTION _jobs_dead_cancelled_sync();
-- Rows inserted as dead or cancelled (fixtures, imports from elsewhere): enqueues insert
-- queued jobs, so the WHEN is false for them.
DROP TRIGGER IF EXISTS jobs_dead_cancelled_insert ON jobs;
CREATE TRIGGER jobs_dead_cancelled_insert
    AFTER INSERT ON jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('dead', 'cancelled'))
    EXECUTE FUNCTION _jobs_dead_cancelled_sync();
DROP TRIGGER IF EXISTS jobs_dead_cancelled_release ON jobs;
CREATE TRIGGER jobs_dead_cancelled_release
    AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.state IN ('dead', 'cancelled'))
    EXECUTE FUNCTION _jobs_dead_cancelled_sync();
