-- 004: jobs_heartbeat_many no longer waits for row locks held by other sessions, and says
-- which leases it extended: it returns TABLE (id bigint, extended boolean) instead of
-- SETOF bigint. CREATE OR REPLACE cannot change a function's result type, so the old
-- function is dropped first, the functions are installed from the snapshot of sql/ taken
-- for this migration, and the grant that the drop removed is given back to jobs_worker
-- (when that role exists; 003 created it).
--
-- Append-only: never edit this file once released.

DROP FUNCTION IF EXISTS jobs_heartbeat_many(bigint[], integer[], interval);

{{ install_snapshot "004" }}

DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobs_worker') THEN
        GRANT EXECUTE ON FUNCTION jobs_heartbeat_many(bigint[], integer[], interval) TO jobs_worker;
    END IF;
END;
$$;
