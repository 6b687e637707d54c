-- jobs_shard: this database's shard number (jobs_set_shard), or NULL when it is not a shard.
--
-- Promises: every job created since jobs_set_shard(n), and every queued or running job,
--           has id % 1024 = n (jobs_set_shard refuses stray live jobs, and jobs_retry and
--           jobs_retry_many do not queue stray finished ones again). Routers check it against
--           their own map of shards when they connect.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION jobs_shard()
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
    SELECT s.shard FROM jobs_settings s
$$;

COMMENT ON FUNCTION jobs_shard() IS
    'skiplock: this database''s shard number (jobs_set_shard), or NULL when it is not a shard.';
