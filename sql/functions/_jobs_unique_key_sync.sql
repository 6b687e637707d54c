-- _jobs_unique_key_sync: keeps jobs_unique_keys in step with the live keyed jobs (trigger).
--
-- Promises: when a job with a unique_key leaves the live states (waiting, queued, running)
--           for done, dead or cancelled, or is deleted while live, its key row goes, so the key is free for the next enqueue;
--           a job enqueued with unique_for keeps its key row instead, with held_until = its
--           finished_at (now() when the completion deletes the row) + unique_for: the key
--           stays taken for that long (jobs_enqueue returns this job's id meanwhile, and
--           jobs_maintain removes the row after). Only the row naming the job: a job whose
--           key a replace gave to a newer one (superseded_by) frees and holds nothing.
--           When one comes back (jobs_retry, jobs_retry_many), its key row is inserted again,
--           which raises 23505 on constraint jobs_unique_key_idx when a live job holds the key
--           or another finished job's unique_for period does (or waits for a transaction that
--           holds it uncommitted); a period held by the job's own end, or one that is over,
--           gives way to it. Fires for keyed jobs only
--           (the triggers' WHEN), so unkeyed jobs cost it nothing; jobs_enqueue and
--           jobs_enqueue_many insert the key rows of new jobs themselves.
-- Locks:    the key row. States: none of jobs.
-- Time:     now() (transaction start) for a deleted job's period and for a period being over.
CREATE OR REPLACE FUNCTION _jobs_unique_key_sync()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.state IN ('done', 'dead', 'cancelled') THEN
        IF OLD.unique_for IS NULL THEN
            DELETE FROM jobs_unique_keys k
            WHERE k.queue = OLD.queue AND k.unique_key = OLD.unique_key AND k.id = OLD.id;
        ELSIF TG_OP = 'DELETE' THEN
            -- Throttle: the key stays taken for unique_for after the job's end (here a
            -- completion that deletes the row).
            UPDATE jobs_unique_keys k
            SET held_until = now() + OLD.unique_for
            WHERE k.queue = OLD.queue AND k.unique_key = OLD.unique_key AND k.id = OLD.id;
        ELSE
            UPDATE jobs_unique_keys k
            SET held_until = coalesce(NEW.finished_at, now()) + OLD.unique_for
            WHERE k.queue = OLD.queue AND k.unique_key = OLD.unique_key AND k.id = OLD.id;
        END IF;
    ELSE
        DELETE FROM jobs_unique_keys k
        WHERE k.queue = NEW.queue AND k.unique_key = NEW.unique_key
          AND k.held_until IS NOT NULL
          AND (k.id = NEW.id OR k.held_until <= now());
        INSERT INTO jobs_unique_keys (queue, unique_key, id) VALUES (NEW.queue, NEW.unique_key, NEW.id);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION _jobs_unique_key_sync() IS
    'skiplock (private): trigger keeping jobs_unique_keys in step with the live keyed jobs.';

DROP TRIGGER IF EXISTS jobs_unique_key_sync ON jobs;
CREATE TRIGGER jobs_unique_key_sync
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.unique_key IS NOT NULL
          -- Live: waiting, queued or running (named by what it is not, so that this file
          -- does not name 'waiting', which migration 7 adds in the same transaction).
          AND (OLD.state IN ('done', 'dead', 'cancelled')) <> (NEW.state IN ('done', 'dead', 'cancelled')))
    EXECUTE FUNCTION _jobs_unique_key_sync();
DROP TRIGGER IF EXISTS jobs_unique_key_release ON jobs;
CREATE TRIGGER jobs_unique_key_release
    AFTER DELETE ON jobs
    FOR EACH ROW
    WHEN (OLD.unique_key IS NOT NULL AND OLD.state NOT IN ('done', 'dead', 'cancelled'))
    EXECUTE FUNCTION _jobs_unique_key_sync();
