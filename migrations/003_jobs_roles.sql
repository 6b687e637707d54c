-- skiplock roles: what producers, workers and operators may call. See docs/security.md.
--
--   jobs_producer  jobs_enqueue, jobs_enqueue_many, jobs_get
--   jobs_worker    jobs_claim, jobs_complete(_many), jobs_fail, jobs_heartbeat(_many),
--                  jobs_snooze, jobs_cancel(id, attempt, error) (fenced), jobs_requeue_expired,
--                  jobs_stats, jobs_backoff, jobs_get
--   jobs_admin     jobs_cancel(id), jobs_retry, jobs_prune, jobs_requeue_expired, jobs_stats,
--                  jobs_backoff, jobs_get; SELECT and UPDATE on jobs_settings
--
-- The functions are SECURITY DEFINER and PUBLIC may execute none of them (sql/install.sql
-- revokes it), so these grants are the only way in: no role needs privileges on the tables.
-- Application logins get a role with GRANT jobs_worker TO app_worker.
--
-- Role names are global to the cluster, so every database installed in it shares the three
-- roles; each database grants them its own functions. The roles are created NOLOGIN when
-- missing, tolerating a concurrent migration of another database creating them first. An
-- installer without CREATEROLE gets a NOTICE instead, and only the roles that exist get
-- grants. This file is idempotent: after creating missing roles, an owner of the functions
-- can run it again (with search_path set to the install schema) to grant them.
--
-- Append-only: never edit this file once released; change grants in a new migration.

DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['jobs_producer', 'jobs_worker', 'jobs_admin'] LOOP
        CONTINUE WHEN EXISTS (SELECT FROM pg_roles WHERE rolname = v_role);
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
        EXCEPTION
            -- Another database of the cluster is migrating too and created it first
            -- (which error depends on whether its transaction had committed).
            WHEN duplicate_object OR unique_violation THEN
                NULL;
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'skiplock: cannot create role % (the installer lacks CREATEROLE); skipping its grants', v_role
                    USING HINT = 'Have a superuser run CREATE ROLE ' || v_role || ' NOLOGIN, then grant it the functions as described in docs/security.md.';
        END;
    END LOOP;
END;
$$;

DO $$
DECLARE
    v_grant record;
BEGIN
    FOR v_grant IN
        SELECT g.role, g.privileges, g.object
        FROM (VALUES
            ('jobs_producer', 'EXECUTE', 'FUNCTION jobs_enqueue(text, jsonb, text, timestamptz, integer, integer, text)'),
            ('jobs_producer', 'EXECUTE', 'FUNCTION jobs_enqueue_many(text[], jsonb[], text[], timestamptz[], integer[], integer[], text[])'),
            ('jobs_producer', 'EXECUTE', 'FUNCTION jobs_get(bigint)'),

            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_claim(text, integer, text[], interval)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_complete(bigint, integer)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_complete_many(bigint[], integer[])'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_fail(bigint, integer, text, timestamptz)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_heartbeat(bigint, integer, interval)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_heartbeat_many(bigint[], integer[], interval)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_snooze(bigint, integer, timestamptz)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_cancel(bigint, integer, text)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_requeue_expired()'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_stats()'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_backoff(integer)'),
            ('jobs_worker',   'EXECUTE', 'FUNCTION jobs_get(bigint)'),

            ('jobs_admin',    'EXECUTE', 'FUNCTION jobs_cancel(bigint)'),
            ('jobs_admin',    'EXECUTE', 'FUNCTION jobs_retry(bigint)'),
            ('jobs_admin',    'EXECUTE', 'FUNCTION jobs_prune(interval, boolean, integer)'),
            ('jobs_admin',    'EXECUTE', 'FUNCTION jobs_requeue_expired()'),
            ('jobs_admin',    'EXECUTE', 'FUNCTION jobs_stats()'),
            ('jobs_admin',    'EXECUTE', 'FUNCTION jobs_backoff(integer)'),
            ('jobs_admin',    'EXECUTE', 'FUNCTION jobs_get(bigint)'),
            ('jobs_admin',    'SELECT, UPDATE', 'TABLE jobs_settings')
        ) AS g(role, privileges, object)
        JOIN pg_roles r ON r.rolname = g.role
    LOOP
        EXECUTE format('GRANT %s ON %s TO %I', v_grant.privileges, v_grant.object, v_grant.role);
    END LOOP;

    -- Calling a function needs USAGE on its schema too. PUBLIC has it on public; a dedicated
    -- schema must grant it, which only its owner (or a holder of the grant option) can do.
    IF has_schema_privilege(current_schema(), 'USAGE WITH GRANT OPTION') THEN
        FOR v_grant IN
            SELECT r.rolname AS role
            FROM pg_roles r
            WHERE r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin')
        LOOP
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), v_grant.role);
        END LOOP;
    ELSIF NOT has_schema_privilege('public', current_schema(), 'USAGE') THEN
        RAISE NOTICE 'skiplock: cannot grant USAGE on schema % to the jobs_* roles', current_schema()
            USING HINT = format('Have the schema''s owner run GRANT USAGE ON SCHEMA %I TO jobs_producer, jobs_worker, jobs_admin.', current_schema());
    END IF;

    -- The pinned search_path keeps out objects of other schemas, not of this one: whoever
    -- may create here can plant an overload the functions would call with the owner's rights.
    IF has_schema_privilege('public', current_schema(), 'CREATE') THEN
        RAISE WARNING 'skiplock: every role may create objects in schema %, where skiplock''s SECURITY DEFINER functions run', current_schema()
            USING HINT = format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC, or install into a dedicated schema; see docs/security.md.', current_schema());
    END IF;
END;
$$;
