-- _jobs_completion_deletes: whether completing a job deletes its row instead of keeping it done.
--
-- Promises: true when jobs_settings.done_retention is 0, so a done row would be history that
--           nobody keeps (jobs_maintain deletes it at its next round anyway), and no foreign
--           key to jobs (id) would refuse the delete: one declared ON DELETE NO ACTION or
--           RESTRICT, deferrable ones included (found by their RI triggers on jobs, through
--           pg_trigger's index on tgrelid). Otherwise false, and completion moves the row to
--           done as it always did. Deleting a done row inserts no index entry and leaves no
--           row version behind for vacuum: the cheapest completion there is.
--           A foreign key added while completions run can still make one of them fail with
--           23503 (the job then stays running until its lease expires and runs again).
-- Locks:    none. States: none.
-- Time:     read as of the calling statement's snapshot.
CREATE OR REPLACE FUNCTION _jobs_completion_deletes()
RETURNS boolean
-- PL/pgSQL, not SQL: a SQL function with a SET clause is not inlined, and its body is parsed
-- and planned again at every call (PostgreSQL before 18 keeps no plan of it), once per
-- completion batch; PL/pgSQL keeps the plan for the session.
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN coalesce((SELECT s.done_retention = interval '0' FROM jobs_settings s), false)
       AND NOT EXISTS (
               SELECT FROM pg_catalog.pg_trigger t
               WHERE t.tgrelid = 'jobs'::regclass
                 AND t.tgfoid IN ('pg_catalog."RI_FKey_noaction_del"'::regproc,
                                  'pg_catalog."RI_FKey_restrict_del"'::regproc));
END;
$$;

COMMENT ON FUNCTION _jobs_completion_deletes() IS
    'skiplock (private): whether jobs_complete and jobs_complete_many delete the row (done_retention 0, no restricting foreign key) instead of keeping it done.';
