-- skiplock install preamble: pins the schema every function is created in, and runs with.
--
-- Every file that creates functions starts with this (sql/install.sql, and each migration
-- that freezes functions, through the newest frozen copy of this file). The functions are
-- created with SET search_path FROM CURRENT, which records the search_path set here: the
-- install schema (the first schema of the session's search_path), then pg_temp, last. The
-- functions therefore find the jobs table in the install schema whatever the caller's path,
-- and objects a caller creates in other schemas (or pg_temp) cannot stand in for it. The
-- public jobs_* functions are SECURITY DEFINER, so this is what makes them safe to grant;
-- see docs/security.md. set_config(..., true) lasts until the end of the transaction.
DO $$
BEGIN
    IF current_schema() IS NULL THEN
        RAISE EXCEPTION 'skiplock: no schema to install into: search_path names no existing schema';
    END IF;
    PERFORM set_config('search_path', format('%I, pg_temp', current_schema()), true);
END;
$$;
