-- _jobs_finished_cascade: _jobs_finished for a job that became dead or cancelled (trigger).
--
-- Promises: whatever moves a job others wait for (has_children, notify_finished) to dead or
--           cancelled (jobs_fail, jobs_cancel and jobs_cancel_many, jobs_requeue_expired,
--           jobs_snooze and claims at the attempts limit) NOTIFYs jobs_finished and cancels
--           or releases its children in the same transaction. Fires for those jobs only (the
--           trigger's WHEN), so other jobs cost it nothing; stands aside while _jobs_finished
--           runs (it handles the children it cancels itself). Moves to done call
--           _jobs_finished directly, once per statement, so the children of a batch are locked
--           in one id order.
-- Locks:    as _jobs_finished. States: as _jobs_finished.
CREATE OR REPLACE FUNCTION _jobs_finished_cascade()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    IF current_setting('skiplock.cascading', true) IS DISTINCT FROM 'on' THEN
        PERFORM _jobs_finished(ARRAY[NEW.id]);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION _jobs_finished_cascade() IS
    'skiplock (private): trigger calling _jobs_finished for jobs others wait for that become dead or cancelled.';

DROP TRIGGER IF EXISTS jobs_finished_cascade ON jobs;
CREATE TRIGGER jobs_finished_cascade
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('dead', 'cancelled') AND OLD.state NOT IN ('dead', 'cancelled', 'done')
          AND (NEW.has_children OR NEW.notify_finished))
    EXECUTE FUNCTION _jobs_finished_cascade();
