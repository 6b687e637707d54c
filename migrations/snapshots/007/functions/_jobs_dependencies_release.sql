-- _jobs_dependencies_release: drops a deleted job's jobs_dependencies rows as a child (trigger).
--
-- Promises: when a job with parents (depends_on) is deleted (retention, jobs_delete_many,
--           a direct DELETE), its rows in jobs_dependencies go with it, so a parent finishing
--           later finds no child to release. Fires for jobs with parents only (the trigger's
--           WHEN). A deleted parent's rows stay until its children go: a child cancelled by it
--           and retried afterwards then waits until an operator cancels it.
-- Locks:    the rows it deletes. States: none of jobs.
CREATE OR REPLACE FUNCTION _jobs_dependencies_release()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    DELETE FROM jobs_dependencies d WHERE d.child_id = OLD.id;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION _jobs_dependencies_release() IS
    'skiplock (private): trigger dropping a deleted job''s dependency rows.';

DROP TRIGGER IF EXISTS jobs_dependencies_release ON jobs;
CREATE TRIGGER jobs_dependencies_release
    AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.depends_on IS NOT NULL)
    EXECUTE FUNCTION _jobs_dependencies_release();
