-- _jobs_truncate_sync: empties the tables that list jobs when jobs is truncated (trigger).
--
-- Promises: a TRUNCATE of jobs (a test's teardown, an operator starting over) truncates
--           jobs_queued, jobs_claims, jobs_unique_keys, jobs_dead_cancelled and
--           jobs_dependencies in the same
--           transaction, so no claim finds a row of a job that is gone, or of another job that
--           got its id after RESTART IDENTITY.
-- Locks:    ACCESS EXCLUSIVE on those tables, as TRUNCATE takes. States: none.
CREATE OR REPLACE FUNCTION _jobs_truncate_sync()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    TRUNCATE jobs_queued, jobs_claims, jobs_unique_keys, jobs_dead_cancelled, jobs_dependencies;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION _jobs_truncate_sync() IS
    'skiplock (private): trigger emptying the tables that list jobs when jobs is truncated.';

DROP TRIGGER IF EXISTS jobs_truncate_sync ON jobs;
CREATE TRIGGER jobs_truncate_sync
    AFTER TRUNCATE ON jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION _jobs_truncate_sync();
