-- jobs_set_shard: makes this database shard number `shard` of a sharded skiplock: from the
-- commit on, every new job id carries the shard number in its low 10 bits (id % 1024 = shard).
--
-- Promises: a job's id alone says which shard holds it, so a router (the PL/Proxy functions of
--           docs/scaling.md, or a driver holding one pool per shard) sends jobs_complete,
--           jobs_fail, jobs_heartbeat and every other id-taking call to the right database
--           without a lookup. Ids stay unique and increasing within the shard: the identity
--           sequence of jobs.id moves to the next multiple of 1024 above every id handed out
--           so far, plus shard, and counts up by 1024. Up to 1024 shards (0..1023); because
--           the shard number sits in the low bits, a router for any power-of-two number of
--           partitions up to 1024 (id & (n - 1)) and a modular one (id % 1024) both find it,
--           so adding shards later leaves every existing id where it points. Calling it again
--           with the same shard changes nothing that matters (ids keep increasing). Records
--           the number in jobs_settings.shard, which jobs_shard returns.
--           Refuses (55000) while the database holds queued or running jobs whose id does not
--           carry the shard number, because a router could not reach them: finish, cancel or
--           delete them first. Finished jobs with such ids stay readable on this database
--           directly (their id may point a router elsewhere), and stay finished: jobs_retry
--           refuses them (55000) and jobs_retry_many leaves them alone, so from the commit on
--           every queued or running job carries the shard number. No other path brings a
--           finished job back, and running -> queued (fail, snooze, expired lease) keeps the
--           id.
-- Locks:    jobs in ACCESS EXCLUSIVE mode until the transaction ends (ALTER TABLE of the
--           identity column): enqueues and claims wait for it. Run it at set-up, not under load.
-- States:   none of the jobs.
-- Errors:   22023 when shard is NULL or not in 0..1023; 55000 as above.
CREATE OR REPLACE FUNCTION jobs_set_shard(shard integer)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_stray bigint;
    v_seq   regclass;
    v_last  bigint;
    v_next  bigint;
BEGIN
    IF jobs_set_shard.shard IS NULL OR jobs_set_shard.shard < 0 OR jobs_set_shard.shard > 1023 THEN
        PERFORM _jobs_invalid('jobs_set_shard', 'shard', 'must be between 0 and 1023');
    END IF;

    -- Taken before the check, so no job can be enqueued between the check and the ALTER.
    LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE;

    SELECT j.id INTO v_stray
    FROM jobs j
    WHERE j.state IN ('queued', 'running') AND j.id % 1024 <> jobs_set_shard.shard
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'jobs_set_shard: job % is queued or running and its id does not carry shard %', v_stray, jobs_set_shard.shard
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A router could not reach it. Let unfinished jobs finish, or cancel or delete them, then call jobs_set_shard again.';
    END IF;

    v_seq := pg_get_serial_sequence(format('%I.jobs', current_schema()), 'id')::regclass;
    EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s', v_seq) INTO v_last;
    v_last := greatest(v_last, (SELECT max(j.id) FROM jobs j), 0);
    v_next := (v_last / 1024 + 1) * 1024 + jobs_set_shard.shard;
    EXECUTE format('ALTER TABLE jobs ALTER COLUMN id SET INCREMENT BY 1024 RESTART WITH %s', v_next);

    UPDATE jobs_settings s SET shard = jobs_set_shard.shard;
END;
$$;

COMMENT ON FUNCTION jobs_set_shard(integer) IS
    'skiplock: makes this database shard N (0..1023): new job ids carry N in their low 10 bits.';
