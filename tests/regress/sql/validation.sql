-- Bad arguments: every jobs_* function rejects them with SQLSTATE 22023 and a message
-- '<function>: <parameter> <problem>', before it changes anything. After each error the
-- test prints psql's SQLSTATE and whether the jobs table is byte-for-byte what it was.
-- The other arguments of each call are valid and would change the table if the bad one
-- were let through (the fixture has a queued, a running, a done and a dead job).
\set VERBOSITY terse

-- fixture
SELECT jobs_enqueue('fixture-running') AS running \gset
SELECT attempt = 1 AS ok FROM jobs_claim('w');
SELECT jobs_enqueue('fixture-done') AS done \gset
SELECT jobs_complete(id, attempt) AS ok FROM jobs_claim('w');
SELECT jobs_enqueue('fixture-dead', max_attempts => 1) AS dead \gset
SELECT jobs_fail(id, attempt, 'fixture') AS state FROM jobs_claim('w');
SELECT jobs_enqueue('fixture-queued') AS queued \gset
SELECT id, kind, state, attempts FROM jobs ORDER BY id;
CREATE TEMP VIEW fingerprint AS
    SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY j.id), '')) AS fp FROM jobs j;
SELECT fp AS fp0 FROM fingerprint \gset

-- jobs_enqueue
SELECT jobs_enqueue(NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue(repeat('k', 201));
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue(repeat('é', 101));  -- 101 characters, 202 bytes
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', payload => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', queue => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', queue => '');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', queue => repeat('q', 201));
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', run_at => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', run_at => 'infinity');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', run_at => '-infinity');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', priority => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', max_attempts => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', max_attempts => 0);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', max_attempts => -1);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', unique_key => '');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue('k', unique_key => repeat('u', 201));
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_enqueue_many: whole arrays
SELECT jobs_enqueue_many(NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[100001]));
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], payloads => ARRAY['{}']::jsonb[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => ARRAY['a', 'b', 'c']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[]::timestamptz[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], priorities => ARRAY[1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], max_attempts => ARRAY[1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['u']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
-- multidimensional arrays, even with as many elements as kinds
SELECT jobs_enqueue_many('{{k},{k}}'::text[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], payloads => '{{"{}"},{"{}"}}'::jsonb[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => '{{a},{b}}'::text[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[ARRAY[now()], ARRAY[now()]]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], priorities => '{{1},{2}}'::integer[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], max_attempts => '{{1},{2}}'::integer[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => '{{u},{v}}'::text[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_enqueue_many: one bad element fails the whole call (element 1 is valid)
SELECT jobs_enqueue_many(ARRAY['k', NULL]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', '']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', repeat('k', 201)]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], payloads => ARRAY['{}', NULL]::jsonb[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => ARRAY['a', NULL]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => ARRAY['a', '']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[now(), NULL]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[now(), 'infinity']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], run_ats => ARRAY[now(), '-infinity']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], priorities => ARRAY[0, NULL]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], max_attempts => ARRAY[1, 0]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['u', '']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY[NULL, repeat('u', 201)]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
-- the first bad element is the one named
SELECT jobs_enqueue_many(ARRAY['k', 'k', NULL, '']);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_claim (jobs are ready: a claim that got through would change the table)
SELECT * FROM jobs_claim(NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim(repeat('w', 201));
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', max_jobs => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', max_jobs => 0);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', max_jobs => 10001);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', queues => '{}');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', queues => ARRAY['default', NULL]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', queues => '{{default}}'::text[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', lease => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', lease => '0');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', lease => '-1 second');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', lease => '100 years 1 microsecond');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_claim('w', lease => '178000000 years');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_complete, jobs_fail, jobs_heartbeat, jobs_snooze (the running job is held at attempt 1)
SELECT jobs_complete(NULL, 1);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete(:running, NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_fail(NULL, 1, 'e');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_fail(:running, NULL, 'e');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_fail(:running, 1, NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_fail(:running, 1, 'e', 'infinity');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_fail(:running, 1, 'e', '-infinity');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat(NULL, 1);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat(:running, NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat(:running, 1, lease => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat(:running, 1, lease => '0');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat(:running, 1, lease => '-5 minutes');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat(:running, 1, lease => '100 years 1 microsecond');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat(:running, 1, lease => '178000000 years');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_snooze(NULL, 1, now());
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_snooze(:running, NULL, now());
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_snooze(:running, 1, NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_snooze(:running, 1, 'infinity');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_snooze(:running, 1, '-infinity');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_complete_many, jobs_heartbeat_many
SELECT jobs_complete_many(NULL, ARRAY[1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete_many(ARRAY[:running]::bigint[], NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete_many(ARRAY[:running]::bigint[], ARRAY[1, 1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete_many(ARRAY[:running, NULL]::bigint[], ARRAY[1, 1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete_many(ARRAY[:running]::bigint[], ARRAY[NULL]::integer[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete_many(array_fill(:running::bigint, ARRAY[100001]), array_fill(1, ARRAY[100001]));
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete_many(ARRAY[ARRAY[:running]]::bigint[], ARRAY[1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_complete_many(ARRAY[:running]::bigint[], ARRAY[ARRAY[1]]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(NULL, ARRAY[1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running]::bigint[], NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running]::bigint[], ARRAY[1, 1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running, NULL]::bigint[], ARRAY[1, 1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running]::bigint[], ARRAY[NULL]::integer[]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(array_fill(:running::bigint, ARRAY[100001]), array_fill(1, ARRAY[100001]));
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[ARRAY[:running]]::bigint[], ARRAY[1]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running]::bigint[], ARRAY[ARRAY[1]]);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running]::bigint[], ARRAY[1], lease => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running]::bigint[], ARRAY[1], lease => '0');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_heartbeat_many(ARRAY[:running]::bigint[], ARRAY[1], lease => '100 years 1 microsecond');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_cancel, jobs_retry, jobs_get
SELECT jobs_cancel(NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_retry(NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT * FROM jobs_get(NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_prune (the done job finished in an earlier transaction: older_than 0 would delete it)
SELECT jobs_prune(older_than => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_prune(older_than => '-1 second');
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_prune(older_than => '0', include_dead => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_prune(older_than => '0', max_jobs => NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_prune(older_than => '0', max_jobs => 0);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
-- a retention past the timestamp range is valid and finds nothing that old
SELECT jobs_prune(older_than => '178000000 years', include_dead => true) AS deleted;
SELECT fp = :'fp0' AS unchanged FROM fingerprint;

-- jobs_backoff
SELECT jobs_backoff(NULL);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_backoff(0);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;
SELECT jobs_backoff(-1);
SELECT :'SQLSTATE' AS sqlstate, fp = :'fp0' AS unchanged FROM fingerprint;

-- the bounds themselves are accepted
SELECT jobs_enqueue(repeat('k', 200), queue => repeat('q', 200), unique_key => repeat('u', 200),
                    max_attempts => 1, priority => -2147483648) > 0 AS enqueued;
SELECT count(*) AS claimed FROM jobs_claim(repeat('w', 200), max_jobs => 10000, lease => '1 microsecond');
SELECT count(*) AS deleted FROM jobs_prune(older_than => '0', include_dead => true, max_jobs => 1);
SELECT jobs_backoff(1) > interval '0' AS positive;
-- and the fingerprint does see changes
SELECT fp <> :'fp0' AS changed FROM fingerprint;

-- arrays may start at any index: element order is what counts
SELECT jobs_enqueue('lower-bound', queue => 'lb') AS lb \gset
SELECT id = :lb AS claimed FROM jobs_claim('w', 1, '[0:0]={lb}'::text[], lease => '100 years');
SELECT array_agg(t.id) = ARRAY[:lb]::bigint[] AS extended
FROM jobs_heartbeat_many(('[0:0]={' || :lb || '}')::bigint[], '[7:7]={1}'::integer[], lease => '100 years') AS t(id);
SELECT array_agg(t.id) = ARRAY[:lb]::bigint[] AS completed
FROM jobs_complete_many(('[-1:-1]={' || :lb || '}')::bigint[], '[0:0]={1}'::integer[]) AS t(id);
SELECT array_agg(t.id ORDER BY t.ord) AS ids
FROM jobs_enqueue_many('[0:1]={a,b}'::text[], queues => '[5:6]={lb1,lb2}'::text[],
                       priorities => ARRAY[2, 1], unique_keys => '[2:3]={x,NULL}'::text[])
     WITH ORDINALITY AS t(id, ord) \gset
SELECT array_agg(j.kind || '@' || j.queue || '/' || j.priority || '/' || coalesce(j.unique_key, '-') ORDER BY t.ord)
           = '{a@lb1/2/x,b@lb2/1/-}' AS in_order
FROM unnest(:'ids'::bigint[]) WITH ORDINALITY AS t(id, ord)
JOIN jobs j ON j.id = t.id;
SELECT array_agg(queue ORDER BY queue) = '{lb1,lb2}' AS claimed_both
FROM jobs_claim('w', 10, '[5:6]={lb1,lb2}'::text[]);
-- An empty call still checks its other arrays.
SELECT jobs_enqueue_many('{}', queues => ARRAY['q']);
SELECT jobs_enqueue_many('{}', payloads => '{{"{}"}}'::jsonb[]);
SELECT count(*) AS nothing FROM jobs_enqueue_many('{}');
