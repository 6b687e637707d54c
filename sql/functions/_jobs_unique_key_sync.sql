-- _jobs_unique_key_sync: keeps jobs_unique_keys in step with the live keyed jobs (trigger).
--
-- Promises: when a job with a unique_key leaves the live states (waiting, queued, running)
--           for done, dead or cancelled, or is deleted while live, its key row goes, so the key is free for the next enqueue;
--           when one comes back (jobs_retry, jobs_retry_many), its key row is inserted again,
--           which raises 23505 on constraint jobs_unique_key_idx when a live job holds the key
--           (or waits for a transaction that holds it uncommitted). Fires for keyed jobs only
--           (the triggers' WHEN), so unkeyed jobs cost it nothing; jobs_enqueue and
--           jobs_enqueue_many insert the key rows of new jobs themselves.
-- Locks:    the key row. States: none of jobs.
CREATE OR REPLACE FUNCTION _jobs_unique_key_sync()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.state IN ('done', 'dead', 'cancelled') THEN
        DELETE FROM jobs_unique_keys k
        WHERE k.queue = OLD.queue AND k.unique_key = OLD.unique_key AND k.id = OLD.id;
    ELSE
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
