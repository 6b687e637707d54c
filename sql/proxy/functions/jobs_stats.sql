-- jobs_stats (proxy): job counts by queue and state, from every shard.
--
-- Promises: the shard's jobs_stats run on all shards in parallel (RUN ON ALL); returns the
--           union of their rows. A queue lives on one shard, so each queue's rows come from
--           that shard alone.
-- Locks:    none. States: none.
-- Errors:   when a shard is down, PL/Proxy's connection error naming it: a partial answer
--           would look like jobs that vanished.
CREATE OR REPLACE FUNCTION jobs_stats()
RETURNS SETOF jobs_queue_stats
LANGUAGE plproxy
SET search_path FROM CURRENT
AS $$
    CLUSTER 'skiplock_shards';
    RUN ON ALL;
$$;
