-- jobs_enqueue_workflow: adds a whole graph of jobs (a workflow) in one call; returns each
-- step's name and job id.
--
-- Promises: steps is a JSON array of objects, one per step:
--             name               required: a non-empty string of at most 200 bytes, unique
--             kind               required, as jobs_enqueue's
--             payload            default {}
--             queue              default "default"
--             priority           default 0 (an integer)
--             max_attempts       default 5 (an integer >= 1)
--             run_at             default now() (a timestamp string)
--             concurrency_key    default none
--             meta               default none (an object)
--             depends_on         default [] (names of other steps)
--             on_parent_failure  default "cancel" ("cancel" or "run")
--             notify_finished    default false
--           and no other field (unique_key is not taken: a step is part of its workflow).
--           Each step is a job as jobs_enqueue would make it with depends_on = its parents'
--           ids (waiting until they are done, the same cascade rules), plus workflow_id (the
--           id of the workflow's first step, shared by all) and workflow_step (its name):
--           the keys of a child's jobs_claimed.parent_results are its parents' step names.
--           Steps are inserted parents first (by depth, then in array order), so a parent's
--           id is lower than its children's. All or nothing: any bad step inserts nothing.
-- Locks:    only the new rows. States: new jobs in queued (steps without parents) and waiting.
-- Time:     now() (transaction start).
-- Errors:   22023 naming steps when it is not a non-empty array of at most 10000 objects,
--           a name is missing, duplicated or not a string, a depends_on names an unknown
--           step or is not an array of names, the steps form a cycle (a step depending on
--           itself included), or a field is unknown, has the wrong type or a value
--           jobs_enqueue refuses.
CREATE OR REPLACE FUNCTION jobs_enqueue_workflow(steps jsonb)
RETURNS TABLE (name text, id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_n       integer;
    v_index   jsonb;
    v_step    jsonb;
    v_name    text;
    v_dep     jsonb;
    v_key     text;
    v_parent  integer;
    v_ep      integer[] := '{}';
    v_ec      integer[] := '{}';
    v_names   text[] := '{}';
    v_depth   integer[];
    v_pending integer[];
    v_ready   integer[];
    v_head    integer;
    v_child   integer;
    v_children   jsonb;
    v_parents_of jsonb;
    v_ids     bigint[];
    v_wf      bigint;
    v_parents bigint[];
    v_i       integer;
    v_id      bigint;
    v_kind    text;
    v_queue   text;
    v_payload jsonb;
    v_prio    integer;
    v_max     integer;
    v_run_at  timestamptz;
    v_ckey    text;
    v_meta    jsonb;
    v_policy  text;
    v_nf      boolean;
BEGIN
    IF jsonb_typeof(jobs_enqueue_workflow.steps) IS DISTINCT FROM 'array'
       OR jsonb_array_length(jobs_enqueue_workflow.steps) = 0 THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', 'must be a non-empty JSON array of step objects');
    END IF;
    v_n := jsonb_array_length(jobs_enqueue_workflow.steps);
    IF v_n > 10000 THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', 'must hold at most 10000 steps');
    END IF;

    -- Names.
    FOR v_i IN 1 .. v_n LOOP
        v_step := jobs_enqueue_workflow.steps -> (v_i - 1);
        IF jsonb_typeof(v_step) IS DISTINCT FROM 'object' THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('element %s is not an object', v_i - 1));
        END IF;
        IF jsonb_typeof(v_step -> 'name') IS DISTINCT FROM 'string' OR v_step ->> 'name' = ''
           OR octet_length(v_step ->> 'name') > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('element %s has no name (a non-empty string of at most 200 bytes)', v_i - 1));
        END IF;
        v_name := v_step ->> 'name';
        -- A misspelt field would otherwise be a default silently taken.
        SELECT k INTO v_key FROM jsonb_object_keys(v_step) AS k
        WHERE k NOT IN ('name', 'kind', 'payload', 'queue', 'priority', 'max_attempts', 'run_at', 'concurrency_key',
                        'meta', 'depends_on', 'on_parent_failure', 'notify_finished')
        LIMIT 1;
        IF FOUND THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s has an unknown field %s', to_jsonb(v_name), to_jsonb(v_key)));
        END IF;
        v_names[v_i] := v_name;
    END LOOP;
    SELECT x.nm INTO v_name FROM unnest(v_names) AS x(nm) GROUP BY x.nm HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('has two steps named %s', to_jsonb(v_name)));
    END IF;
    -- Built once: appending to a jsonb value copies it, which made each step cost as many.
    v_index := (SELECT jsonb_object_agg(x.nm, x.i) FROM unnest(v_names) WITH ORDINALITY AS x(nm, i));

    -- Edges (parent index, child index).
    FOR v_i IN 1 .. v_n LOOP
        v_step := jobs_enqueue_workflow.steps -> (v_i - 1);
        IF v_step ? 'depends_on' AND jsonb_typeof(v_step -> 'depends_on') <> 'null' THEN
            IF jsonb_typeof(v_step -> 'depends_on') <> 'array' THEN
                PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                    format('step %s: depends_on must be an array of step names', to_jsonb(v_step ->> 'name')));
            END IF;
            FOR v_dep IN SELECT e FROM jsonb_array_elements(v_step -> 'depends_on') AS e LOOP
                IF jsonb_typeof(v_dep) <> 'string' OR NOT v_index ? (v_dep #>> '{}') THEN
                    PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                        format('step %s depends on unknown step %s', to_jsonb(v_step ->> 'name'), v_dep));
                END IF;
                v_parent := (v_index ->> (v_dep #>> '{}'))::integer;
                v_ep[cardinality(v_ep) + 1] := v_parent;
                v_ec[cardinality(v_ec) + 1] := v_i;
            END LOOP;
        END IF;
    END LOOP;

    -- Depth of each step (the longest path from a step without parents), in topological
    -- order (Kahn): a step is taken once all its parents were; steps never taken form a
    -- cycle. Linear in steps and dependencies.
    v_children := (SELECT jsonb_object_agg(g.p, g.cs)
                   FROM (SELECT v_ep[e] AS p, jsonb_agg(v_ec[e]) AS cs
                         FROM generate_subscripts(v_ep, 1) AS e GROUP BY 1) AS g);
    v_pending := array_fill(0, ARRAY[v_n]);
    FOR v_i IN SELECT e FROM generate_subscripts(v_ec, 1) AS e LOOP
        v_pending[v_ec[v_i]] := v_pending[v_ec[v_i]] + 1;
    END LOOP;
    v_depth := array_fill(0, ARRAY[v_n]);
    v_ready := ARRAY(SELECT s.i FROM generate_series(1, v_n) AS s(i) WHERE v_pending[s.i] = 0 ORDER BY s.i);
    v_head := 1;
    WHILE v_head <= cardinality(v_ready) LOOP
        v_i := v_ready[v_head];
        v_head := v_head + 1;
        FOR v_child IN SELECT c::integer FROM jsonb_array_elements_text(v_children -> v_i::text) AS c LOOP
            v_depth[v_child] := greatest(v_depth[v_child], v_depth[v_i] + 1);
            v_pending[v_child] := v_pending[v_child] - 1;
            IF v_pending[v_child] = 0 THEN
                v_ready[cardinality(v_ready) + 1] := v_child;
            END IF;
        END LOOP;
    END LOOP;
    IF cardinality(v_ready) < v_n THEN
        PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', 'form a cycle (a step depends on itself through depends_on)');
    END IF;
    -- Each step's parents, by index, for the inserts below.
    v_parents_of := (SELECT jsonb_object_agg(g.c, g.ps)
                     FROM (SELECT v_ec[e] AS c, jsonb_agg(v_ep[e]) AS ps
                           FROM generate_subscripts(v_ec, 1) AS e GROUP BY 1) AS g);

    -- Parents first; ids in that order.
    v_ids := array_fill(NULL::bigint, ARRAY[v_n]);
    FOR v_i IN SELECT s.i FROM generate_series(1, v_n) AS s(i) ORDER BY v_depth[s.i], s.i LOOP
        v_step := jobs_enqueue_workflow.steps -> (v_i - 1);
        v_name := v_step ->> 'name';
        -- Each field's JSON type first: ->> would read 5 as the queue "5".
        SELECT k INTO v_key
        FROM (VALUES ('kind', 'string'), ('queue', 'string'), ('priority', 'number'), ('max_attempts', 'number'),
                     ('run_at', 'string'), ('concurrency_key', 'string'), ('on_parent_failure', 'string'),
                     ('notify_finished', 'boolean')) AS f(k, t)
        WHERE v_step ? f.k AND jsonb_typeof(v_step -> f.k) NOT IN (f.t, 'null')
        LIMIT 1;
        IF FOUND THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: %s must be a JSON %s', to_jsonb(v_name), v_key,
                       CASE v_key WHEN 'priority' THEN 'integer' WHEN 'max_attempts' THEN 'integer'
                                  WHEN 'notify_finished' THEN 'boolean' ELSE 'string' END));
        END IF;
        BEGIN
            v_kind := v_step ->> 'kind';
            v_payload := coalesce(v_step -> 'payload', '{}');
            v_queue := coalesce(v_step ->> 'queue', 'default');
            v_prio := coalesce((v_step ->> 'priority')::integer, 0);
            v_max := coalesce((v_step ->> 'max_attempts')::integer, 5);
            v_run_at := coalesce((v_step ->> 'run_at')::timestamptz, now());
            v_ckey := v_step ->> 'concurrency_key';
            v_meta := v_step -> 'meta';
            v_policy := coalesce(v_step ->> 'on_parent_failure', 'cancel');
            v_nf := coalesce((v_step ->> 'notify_finished')::boolean, false);
        EXCEPTION WHEN data_exception THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: %s', to_jsonb(v_name), SQLERRM));
        END;
        IF jsonb_typeof(v_step -> 'kind') IS DISTINCT FROM 'string' OR v_kind = '' OR octet_length(v_kind) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: kind must be a non-empty string of at most 200 bytes', to_jsonb(v_name)));
        END IF;
        IF jsonb_typeof(v_payload) = 'null' THEN
            v_payload := '{}';
        END IF;
        IF v_queue = '' OR octet_length(v_queue) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: queue must be a non-empty string of at most 200 bytes', to_jsonb(v_name)));
        END IF;
        IF v_max < 1 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('step %s: max_attempts must be at least 1', to_jsonb(v_name)));
        END IF;
        IF NOT isfinite(v_run_at) THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('step %s: run_at must be a finite timestamp', to_jsonb(v_name)));
        END IF;
        IF v_ckey = '' OR octet_length(v_ckey) > 200 THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: concurrency_key must be a non-empty string of at most 200 bytes', to_jsonb(v_name)));
        END IF;
        IF jsonb_typeof(v_meta) = 'null' THEN
            v_meta := NULL;
        ELSIF jsonb_typeof(v_meta) <> 'object' THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps', format('step %s: meta must be an object', to_jsonb(v_name)));
        END IF;
        IF v_policy NOT IN ('cancel', 'run') THEN
            PERFORM _jobs_invalid('jobs_enqueue_workflow', 'steps',
                format('step %s: on_parent_failure must be "cancel" or "run"', to_jsonb(v_name)));
        END IF;

        v_parents := ARRAY(SELECT DISTINCT v_ids[x::integer]
                           FROM jsonb_array_elements_text(v_parents_of -> v_i::text) AS x ORDER BY 1);
        IF v_wf IS NULL THEN
            v_wf := nextval('jobs_id_seq');
            v_id := v_wf;
        ELSE
            v_id := nextval('jobs_id_seq');
        END IF;
        IF cardinality(v_parents) = 0 THEN
            INSERT INTO jobs (id, queue, kind, payload, run_at, priority, max_attempts, concurrency_key, meta,
                              notify_finished, workflow_id, workflow_step)
            VALUES (v_id, v_queue, v_kind, v_payload, v_run_at, v_prio, v_max, v_ckey, v_meta,
                    nullif(v_nf, false), v_wf, v_name);
            INSERT INTO jobs_queued (queue, priority, run_at, id, concurrency_key)
            VALUES (v_queue, v_prio, v_run_at, v_id, v_ckey);
            IF v_run_at <= now() THEN
                PERFORM pg_notify('jobs_ready', v_queue);
            END IF;
        ELSE
            PERFORM _jobs_enqueue_child(v_kind, v_payload, v_queue, v_run_at, v_prio, v_max, NULL, v_ckey, v_meta,
                                        true, v_parents, v_policy, v_nf, v_id, v_wf, v_name);
        END IF;
        v_ids[v_i] := v_id;
        name := v_name;
        id := v_id;
        RETURN NEXT;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION jobs_enqueue_workflow(jsonb) IS
    'skiplock: adds a graph of jobs with dependencies by step name, all or nothing; returns each step''s name and id.';
