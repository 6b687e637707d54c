-- skiplock proxy grants: the one list of which role may call which proxy function.
--
-- The same three roles as the shards (sql/grants.sql): a login that may call a function on the
-- shards may call it on the proxy. The proxy functions are not SECURITY DEFINER: PL/Proxy
-- connects to the shards as the calling role (its default, through the PUBLIC user mapping
-- jobs_proxy_set_shards creates), so each shard checks the caller's grants again. The private
-- PL/Proxy helpers a public function calls (_jobs_proxy_*_on, _split) need the same roles as
-- that function, and the routing helpers (_jobs_proxy_id_shard, _jobs_proxy_queue_shard, ...)
-- all three roles, because a function that is not SECURITY DEFINER runs its RUN ON with the
-- caller's rights. PUBLIC
-- executes none of them (tests/shardtest checks). Idempotent; applied after every change.

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
    FOR v_function IN
        SELECT f.signature, f.roles::text[] AS roles,
               to_regprocedure(format('%I.%s', current_schema(), f.signature)) AS oid
        FROM (VALUES
            ('_jobs_invalid(text, text, text)',                                                        '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_check_fence_arrays(text, bigint[], integer[])',                                     '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_proxy_shard_count()',                                                               '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_proxy_check_shard(text, integer)',                                                  '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_proxy_id_shard(text, text, bigint)',                                                '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_proxy_queue_shard(text, text, boolean)',                                            '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_proxy_unreachable(text, text)',                                                     '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_proxy_queues_on(integer)',                                                          '{}'),
            ('jobs_proxy_set_shards(text[])',                                                           '{}'),
            ('_jobs_proxy_queue_pin(text, text, integer)',                                              '{jobs_producer, jobs_worker, jobs_admin}'),
            ('_jobs_proxy_enqueue_shard(text, text, bigint[])',                                         '{jobs_producer, jobs_worker, jobs_admin}'),
            ('jobs_enqueue(text, jsonb, text, timestamptz, integer, integer, text, text, jsonb, boolean, bigint[], text, boolean)', '{jobs_producer}'),
            ('_jobs_proxy_workflow_shard(text, jsonb)',                                                 '{jobs_producer, jobs_worker, jobs_admin}'),
            ('jobs_enqueue_workflow(jsonb)',                                                            '{jobs_producer}'),
            ('_jobs_proxy_enqueue_many_on(integer, text[], jsonb[], text[], timestamptz[], integer[], integer[], text[], text[], jsonb[], boolean)', '{jobs_producer}'),
            ('jobs_enqueue_many(text[], jsonb[], text[], timestamptz[], integer[], integer[], text[], text[], jsonb[], boolean)', '{jobs_producer}'),
            ('jobs_notify(text)',                                                                       '{jobs_producer}'),
            ('jobs_claim_on(integer, text, integer, text[], interval)',                                 '{jobs_worker}'),
            ('jobs_claim(text, integer, text[], interval)',                                             '{jobs_worker}'),
            ('jobs_complete(bigint, integer, jsonb)',                                                   '{jobs_worker}'),
            ('_jobs_proxy_complete_many_split(bigint[], integer[], jsonb[])',                           '{jobs_worker}'),
            ('jobs_complete_many(bigint[], integer[], jsonb[])',                                        '{jobs_worker}'),
            ('jobs_checkpoint(bigint, integer, text, jsonb)',                                           '{jobs_worker}'),
            ('jobs_progress(bigint, integer, jsonb)',                                                   '{jobs_worker}'),
            ('jobs_fail(bigint, integer, text, timestamptz)',                                           '{jobs_worker}'),
            ('jobs_heartbeat(bigint, integer, interval)',                                               '{jobs_worker}'),
            ('_jobs_proxy_heartbeat_many_split(bigint[], integer[], interval)',                         '{jobs_worker}'),
            ('jobs_heartbeat_many(bigint[], integer[], interval)',                                      '{jobs_worker}'),
            ('jobs_snooze(bigint, integer, timestamptz)',                                               '{jobs_worker}'),
            ('_jobs_proxy_sum_each(text)',                                                              '{jobs_worker, jobs_admin}'),
            ('_jobs_proxy_requeue_expired_on(integer)',                                                 '{jobs_worker, jobs_admin}'),
            ('jobs_requeue_expired()',                                                                  '{jobs_worker, jobs_admin}'),
            ('jobs_cancel(bigint)',                                                                     '{jobs_admin}'),
            ('jobs_cancel(bigint, integer, text)',                                                      '{jobs_worker}'),
            ('jobs_cancel_workflow(bigint)',                                                            '{jobs_admin}'),
            ('jobs_workflow(bigint)',                                                                   '{jobs_admin}'),
            ('jobs_retry(bigint)',                                                                      '{jobs_admin}'),
            ('jobs_stats()',                                                                            '{jobs_worker, jobs_admin}'),
            ('jobs_get(bigint)',                                                                        '{jobs_producer, jobs_worker, jobs_admin}'),
            ('jobs_result(bigint)',                                                                     '{jobs_producer, jobs_worker, jobs_admin}'),
            ('jobs_pause(text)',                                                                        '{jobs_admin}'),
            ('jobs_resume(text)',                                                                       '{jobs_admin}'),
            ('jobs_set_concurrency(text, integer, integer, boolean, boolean)',                           '{jobs_admin}'),
            ('jobs_set_rate_limit(text, integer, interval, boolean)',                                   '{jobs_admin}'),
            ('jobs_next_start(text)',                                                                   '{jobs_worker, jobs_admin}'),
            ('jobs_queue_limited(text)',                                                                '{jobs_worker, jobs_admin}'),
            ('_jobs_proxy_maintain_on(integer, integer)',                                               '{jobs_worker, jobs_admin}'),
            ('jobs_maintain(integer)',                                                                  '{jobs_worker, jobs_admin}'),
            ('_jobs_proxy_metrics_all()',                                                               '{jobs_worker, jobs_admin}'),
            ('jobs_metrics()',                                                                          '{jobs_worker, jobs_admin}'),
            ('_jobs_proxy_schedule_tick_on(integer)',                                                   '{jobs_worker, jobs_admin}'),
            ('jobs_schedule_tick()',                                                                    '{jobs_worker, jobs_admin}'),
            ('jobs_inspect(bigint)',                                                                    '{jobs_admin}')
        ) AS f(signature, roles)
    LOOP
        IF v_function.oid IS NULL THEN
            RAISE EXCEPTION 'skiplock: sql/proxy/grants.sql lists %, which is not a function of schema %', v_function.signature, current_schema();
        END IF;
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', v_function.oid::regprocedure);
        FOREACH v_role IN ARRAY v_function.roles LOOP
            CONTINUE WHEN NOT EXISTS (SELECT FROM pg_roles WHERE rolname = v_role);
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_function.oid::regprocedure, v_role);
        END LOOP;
    END LOOP;

    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobs_admin') THEN
        -- Which shard each queue is pinned to; changed only through the functions.
        EXECUTE format('GRANT SELECT ON TABLE %I.jobs_proxy_queues TO jobs_admin', current_schema());
    END IF;

    IF has_schema_privilege(current_schema(), 'USAGE WITH GRANT OPTION') THEN
        FOR v_role IN
            SELECT r.rolname FROM pg_roles r WHERE r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin')
        LOOP
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), v_role);
        END LOOP;
    END IF;
END;
$$;
