-- jobs_proxy_set_shards: sets the shards this proxy routes to: connstrs[1] is shard 0,
-- connstrs[2] shard 1, and so on.
--
-- Promises: creates (first call) or updates the foreign server skiplock_shards, PL/Proxy's
--           cluster, with option pN = connstrs[N + 1] for each shard and modular_mapping 1
--           (partition = shard number % shard count, so any count works and shard N is
--           partition pN), a user mapping for PUBLIC without options (each caller reaches
--           the shards as itself, PL/Proxy's default; add CREATE USER MAPPING FOR a role
--           OPTIONS (user, password) for other credentials) and USAGE on the server for the
--           jobs_* roles. Shards can be added (a longer array) and moved (another connection
--           string for an existing number), never removed: ids carry their shard number, and
--           a removed shard's jobs would become unreachable. Before adding shards it pins
--           every queue that has jobs on a configured shard and no row in jobs_proxy_queues
--           (queues enqueued on the shards directly, as the Go driver and the outbox pattern
--           do, or whose pin a rolled-back proxy transaction took back while the shard kept
--           the job) to the shard that holds its jobs (the one its hash over the old count
--           names when it has jobs on several), so that no queue moves away from its jobs
--           when the hash's modulus changes; every configured shard must then be reachable.
--           Records the count in
--           jobs_proxy_cluster and, with the time of the change, in jobs_proxy_cluster_changes
--           (what the routing checks ids against), in the same transaction.
--           PL/Proxy reloads the cluster in every session at its next transaction; routing
--           uses added shards in transactions that start a second or more after the call
--           (_jobs_proxy_shard_count), so call it in its own transaction. Change the
--           cluster only with this function: a pN added by ALTER SERVER is not routed to
--           until it is counted here. Idempotent.
-- Locks:    the server's catalog rows until the transaction ends.
-- States:   none of the jobs.
-- Errors:   22023 naming connstrs when it is NULL, empty, longer than 1024, multidimensional,
--           has a NULL or empty element, carries a password (password=... or a URL's
--           user:password@: every login of the proxy can read the connection strings in
--           pg_foreign_server.srvoptions; passwords go in user mappings, whose options only
--           the server's owner and the mapped user can read), or is shorter than the shards
--           already configured. The errors name the element, never its text.
--           Needs USAGE on the plproxy foreign data wrapper (a superuser, or a grant).
CREATE OR REPLACE FUNCTION jobs_proxy_set_shards(connstrs text[])
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    -- The partitions the server has (it is the truth for PL/Proxy), not the recorded count.
    v_have integer := (SELECT count(*)::integer
                       FROM pg_foreign_server s
                       CROSS JOIN LATERAL pg_options_to_table(s.srvoptions) o
                       WHERE s.srvname = 'skiplock_shards'
                         AND o.option_name ~ '^p[0-9]+$');
    v_role text;
    v_bad bigint;
    v_routed integer;
BEGIN
    IF connstrs IS NULL OR cardinality(connstrs) = 0 THEN
        PERFORM _jobs_invalid('jobs_proxy_set_shards', 'connstrs', 'must name at least one shard');
    END IF;
    IF array_ndims(connstrs) > 1 THEN
        PERFORM _jobs_invalid('jobs_proxy_set_shards', 'connstrs', 'must be a one-dimensional array');
    END IF;
    IF cardinality(connstrs) > 1024 THEN
        PERFORM _jobs_invalid('jobs_proxy_set_shards', 'connstrs', 'must have at most 1024 elements (shards 0 to 1023)');
    END IF;
    IF EXISTS (SELECT FROM unnest(connstrs) AS c WHERE c IS NULL OR c = '') THEN
        PERFORM _jobs_invalid('jobs_proxy_set_shards', 'connstrs', 'must not contain NULL or empty connection strings');
    END IF;
    SELECT u.n INTO v_bad
    FROM unnest(connstrs) WITH ORDINALITY AS u(c, n)
    WHERE u.c ~* '(^|[[:space:]?&])password[[:space:]]*='
       OR u.c ~* '^postgres(ql)?://[^/@?#]*:[^/@?#]*@'
    ORDER BY u.n
    LIMIT 1;
    IF v_bad IS NOT NULL THEN
        PERFORM _jobs_invalid('jobs_proxy_set_shards', 'connstrs',
            format('element %s (shard %s) must not carry a password: every login of the proxy can read the connection strings in pg_foreign_server; give the password in a user mapping (CREATE USER MAPPING ... SERVER skiplock_shards OPTIONS (user ..., password ...))',
                   v_bad, v_bad - 1));
    END IF;
    IF cardinality(connstrs) < v_have THEN
        PERFORM _jobs_invalid('jobs_proxy_set_shards', 'connstrs',
            format('must keep every configured shard: the proxy has %s, got %s (a removed shard''s jobs would be unreachable)',
                   v_have, cardinality(connstrs)));
    END IF;
    connstrs := ARRAY(SELECT c FROM unnest(connstrs) WITH ORDINALITY AS u(c, n) ORDER BY n);

    -- Routing of unpinned queues is hashtext(queue) % count: pin those with jobs before the
    -- count changes, while PL/Proxy's cluster is still the old one.
    v_routed := (SELECT c.shards FROM jobs_proxy_cluster c);
    IF v_routed > 0 AND cardinality(connstrs) > v_routed THEN
        INSERT INTO jobs_proxy_queues AS q (queue, shard)
        SELECT DISTINCT ON (f.queue) f.queue, f.shard
        FROM (SELECT g.shard, x.queue
              FROM generate_series(0, v_routed - 1) AS g(shard)
              CROSS JOIN LATERAL _jobs_proxy_queues_on(g.shard) AS x(queue)) AS f
        ORDER BY f.queue, (f.shard = (hashtext(f.queue)::bigint & 2147483647) % v_routed) DESC, f.shard
        ON CONFLICT (queue) DO NOTHING;
    END IF;

    -- One statement: PL/Proxy's validator checks the whole option list of each statement.
    IF NOT EXISTS (SELECT FROM pg_foreign_server WHERE srvname = 'skiplock_shards') THEN
        EXECUTE format('CREATE SERVER skiplock_shards FOREIGN DATA WRAPPER plproxy OPTIONS (modular_mapping %L, %s)', '1',
                       (SELECT string_agg(format('%I %L', 'p' || (n - 1), c), ', ' ORDER BY n)
                        FROM unnest(connstrs) WITH ORDINALITY AS u(c, n)));
    ELSE
        EXECUTE format('ALTER SERVER skiplock_shards OPTIONS (%s)',
                       (SELECT string_agg(format('%s %I %L', CASE WHEN n <= v_have THEN 'SET' ELSE 'ADD' END, 'p' || (n - 1), c),
                                          ', ' ORDER BY n)
                        FROM unnest(connstrs) WITH ORDINALITY AS u(c, n)));
    END IF;
    IF NOT EXISTS (SELECT FROM pg_user_mappings WHERE srvname = 'skiplock_shards' AND usename = 'public') THEN
        EXECUTE 'CREATE USER MAPPING FOR PUBLIC SERVER skiplock_shards';
    END IF;
    FOR v_role IN
        SELECT r.rolname FROM pg_roles r WHERE r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin')
    LOOP
        EXECUTE format('GRANT USAGE ON FOREIGN SERVER skiplock_shards TO %I', v_role);
    END LOOP;
    -- Last, so that the change's time is as close to the commit as it can be: routing keeps
    -- the count before for transactions that started before it, or up to a second after
    -- (_jobs_proxy_shard_count).
    UPDATE jobs_proxy_cluster c SET shards = cardinality(connstrs)
    WHERE c.shards IS DISTINCT FROM cardinality(connstrs);
    IF FOUND THEN
        -- The first configuration holds for every transaction: no session had a cluster.
        INSERT INTO jobs_proxy_cluster_changes AS h (changed_at, shards)
        VALUES (CASE WHEN NOT EXISTS (SELECT FROM jobs_proxy_cluster_changes) THEN '-infinity' ELSE clock_timestamp() END,
                cardinality(connstrs));
    END IF;
END;
$$;
