-- skiplock grants: the three roles, and the one list of which role may call which function.
--
--   jobs_producer  adds jobs and workflows, publishes to topics (jobs_publish), and follows
--                  their progress and results
--   jobs_worker    claims and runs jobs; runs jobs_maintain and jobs_schedule_tick (the
--                  driver calls them)
--   jobs_admin     cancels, retries, deletes and prunes jobs, in bulk too; reads and tunes
--                  jobs_settings; pauses and resumes queues, sets their concurrency and rate
--                  limits, reads jobs_queues; manages schedules (jobs_schedule,
--                  jobs_unschedule, jobs_schedule_set_enabled, jobs_schedule_run) and reads
--                  jobs_schedules; lists jobs (jobs_list) and reads one in full (jobs_inspect), and a workflow's steps
--                  (jobs_workflow); manages and lists the subscriptions of topics
--                  (jobs_subscribe, jobs_unsubscribe, jobs_subscriptions)
--
-- The functions are SECURITY DEFINER and PUBLIC may execute none of them, so these grants are
-- the only way in: no role needs privileges on the tables. Application logins get a role with
-- GRANT jobs_worker TO app_worker. See docs/security.md.
--
-- Idempotent, and applied again after every change to the functions: sql/install.sql ends
-- with this file, and each migration that creates functions with the newest frozen copy of it
-- (scripts/new-migration writes that), in the same transaction as the CREATE FUNCTIONs. So a
-- function dropped and created again with a new signature gets its grants back, and no
-- grants are written by hand in migrations. An owner of the functions can run it again, with
-- search_path set to the install schema (docs/security.md, "Installing without CREATEROLE").

-- Role names are global to the cluster, so every database installed in it shares the three
-- roles; each database grants them its own functions. The roles are created NOLOGIN when
-- missing, tolerating a concurrent migration of another database creating them first. An
-- installer without CREATEROLE gets a NOTICE instead, and only the roles that exist get
-- grants.
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
    v_function record;
    v_role text;
BEGIN
    -- Every skiplock function, with the roles that may call it: the only place a function's
    -- roles are written. A function missing here stays executable by PUBLIC, so the tests
    -- (tests/security) fail until it is listed; a listed function that is not installed fails
    -- the install. The private _jobs_* helpers are granted to no role: only the functions that
    -- use them (and the owner) run them.
    FOR v_function IN
        SELECT f.signature, f.roles::text[] AS roles,
               to_regprocedure(format('%I.%s', current_schema(), f.signature)) AS oid
        FROM (VALUES
            ('_jobs_invalid(text, text, text)',                                                        '{}'),
            ('_jobs_check_fence_arrays(text, bigint[], integer[])',                                     '{}'),
            ('_jobs_errors_append(jsonb, jsonb)',                                                       '{}'),
            ('_jobs_completion_deletes()',                                                              '{}'),
            ('jobs_backoff(integer)',                                                                   '{jobs_worker, jobs_admin}'),
            ('jobs_enqueue(text, jsonb, text, timestamptz, integer, integer, text, text, jsonb, boolean, bigint[], text, boolean, text, interval)', '{jobs_producer}'),
            ('_jobs_enqueue_duplicate(text, text, text, bigint, jsonb, timestamptz, integer, integer, boolean, text, text, text)', '{}'),
            ('_jobs_enqueue_child(text, jsonb, text, timestamptz, integer, integer, text, text, jsonb, boolean, bigint[], text, boolean, bigint, bigint, text, interval)', '{}'),
            ('jobs_enqueue_workflow(jsonb)',                                                            '{jobs_producer}'),
            ('jobs_enqueue_many(text[], jsonb[], text[], timestamptz[], integer[], integer[], text[], text[], jsonb[], boolean, text[], interval[])', '{jobs_producer}'),
            ('jobs_subscribe(text, text, text)',                                                        '{jobs_admin}'),
            ('jobs_unsubscribe(text, text, text)',                                                      '{jobs_admin}'),
            ('jobs_subscriptions(text)',                                                                '{jobs_admin}'),
            ('jobs_publish(text, jsonb, timestamptz, integer, integer, text, jsonb, boolean)',          '{jobs_producer}'),
            ('jobs_notify(text)',                                                                       '{jobs_producer}'),
            ('_jobs_claim_limited(text, integer, text[], interval, boolean, text[], integer[])',         '{}'),
            ('_jobs_parent_results(bigint, bigint[])',                                                  '{}'),
            ('_jobs_claim_take(text, interval, tid[])',                                                 '{}'),
            ('_jobs_claim_unkeyed(text, integer, integer, bigint[], integer, timestamptz, bigint)',      '{}'),
            ('_jobs_claims_release(bigint[])',                                                          '{}'),
            ('_jobs_queued_sync()',                                                                     '{}'),
            ('_jobs_unique_key_sync()',                                                                 '{}'),
            ('_jobs_unique_key_superseded()',                                                           '{}'),
            ('_jobs_truncate_sync()',                                                                   '{}'),
            ('_jobs_dead_cancelled_sync()',                                                             '{}'),
            ('_jobs_finished(bigint[])',                                                                '{}'),
            ('_jobs_finished_cascade()',                                                                '{}'),
            ('_jobs_dependencies_release()',                                                            '{}'),
            ('_jobs_revive(bigint[])',                                                                  '{}'),
            ('_jobs_prunable(bigint, bigint, boolean, timestamptz)',                                    '{}'),
            ('jobs_claim(text, integer, text[], interval)',                                             '{jobs_worker}'),
            ('jobs_complete(bigint, integer, jsonb)',                                                   '{jobs_worker}'),
            ('jobs_complete_many(bigint[], integer[], jsonb[])',                                        '{jobs_worker}'),
            ('jobs_complete_and_claim(text, bigint[], integer[], integer, text[], interval, jsonb[])',   '{jobs_worker}'),
            ('jobs_checkpoint(bigint, integer, text, jsonb)',                                          '{jobs_worker}'),
            ('jobs_progress(bigint, integer, jsonb)',                                                  '{jobs_worker}'),
            ('jobs_fail(bigint, integer, text, timestamptz)',                                           '{jobs_worker}'),
            ('jobs_heartbeat(bigint, integer, interval)',                                               '{jobs_worker}'),
            ('jobs_heartbeat_many(bigint[], integer[], interval)',                                      '{jobs_worker}'),
            ('jobs_snooze(bigint, integer, timestamptz)',                                               '{jobs_worker}'),
            ('jobs_requeue_expired()',                                                                  '{jobs_worker, jobs_admin}'),
            ('jobs_cancel(bigint)',                                                                     '{jobs_admin}'),
            ('jobs_cancel(bigint, integer, text)',                                                      '{jobs_worker}'),
            ('jobs_retry(bigint)',                                                                      '{jobs_admin}'),
            ('jobs_cancel_workflow(bigint)',                                                            '{jobs_admin}'),
            ('jobs_workflow(bigint)',                                                                   '{jobs_admin}'),
            ('jobs_stats()',                                                                            '{jobs_worker, jobs_admin}'),
            ('jobs_get(bigint)',                                                                        '{jobs_producer, jobs_worker, jobs_admin}'),
            ('jobs_result(bigint)',                                                                     '{jobs_producer, jobs_worker, jobs_admin}'),
            ('jobs_prune(interval, boolean, integer)',                                                  '{jobs_admin}'),
            ('jobs_pause(text)',                                                                        '{jobs_admin}'),
            ('jobs_resume(text)',                                                                       '{jobs_admin}'),
            ('jobs_set_concurrency(text, integer, integer, boolean, boolean)',                           '{jobs_admin}'),
            ('jobs_set_rate_limit(text, integer, interval, boolean)',                                   '{jobs_admin}'),
            ('jobs_next_start(text)',                                                                   '{jobs_worker, jobs_admin}'),
            ('jobs_queue_limited(text)',                                                                '{jobs_worker, jobs_admin}'),
            ('_jobs_check_bulk_args(text, jobs_state[], jobs_state[], integer)',                        '{}'),
            ('jobs_retry_many(bigint[], text, text, jobs_state[], integer)',                            '{jobs_admin}'),
            ('jobs_cancel_many(bigint[], text, text, jobs_state[], integer)',                           '{jobs_admin}'),
            ('jobs_delete_many(bigint[], text, text, jobs_state[], integer)',                           '{jobs_admin}'),
            ('jobs_maintain(integer)',                                                                  '{jobs_worker, jobs_admin}'),
            ('jobs_metrics()',                                                                          '{jobs_worker, jobs_admin}'),
            ('_jobs_cron_field(text, text, text, text, integer, integer, text[], integer, integer)',    '{}'),
            ('_jobs_cron_parse(text, text)',                                                            '{}'),
            ('_jobs_cron_timezone(text, text)',                                                         '{}'),
            ('_jobs_cron_instant(timestamp, text)',                                                     '{}'),
            ('_jobs_cron_next(text, text, timestamptz, text)',                                          '{}'),
            ('_jobs_cron_latest(text, text, text, timestamptz, timestamptz)',                           '{}'),
            ('jobs_cron_next(text, timestamptz, text)',                                                 '{jobs_producer, jobs_worker, jobs_admin}'),
            ('jobs_schedule(text, text, text, jsonb, text, text, integer, integer, boolean)',           '{jobs_admin}'),
            ('jobs_unschedule(text)',                                                                   '{jobs_admin}'),
            ('jobs_schedule_tick()',                                                                    '{jobs_worker, jobs_admin}'),
            ('jobs_schedule_run(text)',                                                                 '{jobs_admin}'),
            ('jobs_schedule_set_enabled(text, boolean)',                                                '{jobs_admin}'),
            ('jobs_list(jobs_state, text, text, integer, bigint)',                                      '{jobs_admin}'),
            ('jobs_inspect(bigint)',                                                                    '{jobs_admin}'),
            ('jobs_set_shard(integer)',                                                                 '{jobs_admin}'),
            ('jobs_shard()',                                                                            '{jobs_producer, jobs_worker, jobs_admin}')
        ) AS f(signature, roles)
    LOOP
        IF v_function.oid IS NULL THEN
            RAISE EXCEPTION 'skiplock: sql/grants.sql lists %, which is not a function of schema %', v_function.signature, current_schema();
        END IF;
        -- CREATE FUNCTION grants EXECUTE to PUBLIC, and every connected user could then act
        -- with the owner's rights. Revoked in the transaction that creates the functions, so
        -- there is no window.
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', v_function.oid::regprocedure);
        FOREACH v_role IN ARRAY v_function.roles LOOP
            CONTINUE WHEN NOT EXISTS (SELECT FROM pg_roles WHERE rolname = v_role);
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_function.oid::regprocedure, v_role);
        END LOOP;
    END LOOP;

    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobs_admin') THEN
        EXECUTE format('GRANT SELECT, UPDATE ON TABLE %I.jobs_settings TO jobs_admin', current_schema());
        -- Queue settings are read with plain SELECT and changed only through the functions.
        EXECUTE format('GRANT SELECT ON TABLE %I.jobs_queues TO jobs_admin', current_schema());
        -- Schedules change only through jobs_schedule and jobs_unschedule.
        EXECUTE format('GRANT SELECT ON TABLE %I.jobs_schedules TO jobs_admin', current_schema());
    END IF;

    -- Calling a function needs USAGE on its schema too. PUBLIC has it on public; a dedicated
    -- schema must grant it, which only its owner (or a holder of the grant option) can do.
    IF has_schema_privilege(current_schema(), 'USAGE WITH GRANT OPTION') THEN
        FOR v_role IN
            SELECT r.rolname
            FROM pg_roles r
            WHERE r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin')
        LOOP
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), v_role);
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
