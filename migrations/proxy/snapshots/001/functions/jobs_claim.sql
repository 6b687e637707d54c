-- jobs_claim (proxy): leases up to max_jobs ready jobs to a worker, from the shards that
-- hold the requested queues.
--
-- Promises: the shards that can hold the jobs are those of the given queues (their pinned
--           shards, jobs_proxy_queues; queues NULL: every shard). With one such shard (one
--           queue, or queues that live together) it is one call of that shard's jobs_claim.
--           Otherwise it asks the shards one after another, starting at a random one so that
--           no shard is starved, for the number still missing, and stops once it has
--           max_jobs. Every job is claimed by exactly one caller (each shard's jobs_claim
--           promises that for its jobs, and a job lives on one shard); each claim commits on
--           its shard when its call returns, independently of the caller's transaction on
--           the proxy. Order: best first within each shard, not across shards. A shard that
--           cannot be reached (_jobs_proxy_unreachable) is skipped with a WARNING naming it,
--           so workers keep taking the other shards' jobs; when no shard answers, the last
--           error is raised. Any other error of a shard asked after jobs were claimed on
--           others ends the loop with a WARNING naming the shard and returns those jobs:
--           raising would hand nobody jobs already committed as claimed on their shards,
--           leaving them running, with an attempt spent, until their leases expired.
-- Locks:    as the shard's jobs_claim, until each shard's call ends.
-- States:   queued -> running, on the shards.
-- Errors:   jobs_claim's errors (22023 for bad arguments, from the first shard asked, before
--           any shard has claimed a job).
CREATE OR REPLACE FUNCTION jobs_claim(
    worker   text,
    max_jobs integer  DEFAULT 1,
    queues   text[]   DEFAULT NULL,
    lease    interval DEFAULT '5 minutes'
)
RETURNS SETOF jobs_claimed
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_shards integer[];
    v_count integer;
    v_start integer;
    v_shard integer;
    v_queues text[];
    v_remaining integer := jobs_claim.max_jobs;
    v_got integer;
    v_claimed integer := 0;
    v_answered boolean := false;
    v_state text;
    v_message text;
    i integer;
BEGIN
    IF jobs_claim.queues IS NULL OR array_ndims(jobs_claim.queues) IS DISTINCT FROM 1
       OR array_position(jobs_claim.queues, NULL) IS NOT NULL THEN
        -- queues NULL: every shard; an empty or malformed array, or one with a NULL: shard 0
        -- raises jobs_claim's 22023. Checked before any shard is asked: in the loop below,
        -- a NULL would reach only shard 0, after other shards had already claimed jobs that
        -- the error then leaves running until their leases expire.
        v_shards := CASE WHEN jobs_claim.queues IS NULL
                         THEN ARRAY(SELECT generate_series(0, _jobs_proxy_shard_count() - 1))
                         ELSE ARRAY[0] END;
    ELSE
        v_shards := ARRAY(SELECT DISTINCT _jobs_proxy_queue_shard('jobs_claim', q, false)
                          FROM unnest(jobs_claim.queues) AS q ORDER BY 1);
    END IF;
    v_count := cardinality(v_shards);
    IF v_count = 1 OR v_remaining IS NULL OR v_remaining < 1 THEN
        -- One shard holds every requested queue (or the arguments are bad, and the shard
        -- says so as one server would).
        RETURN QUERY SELECT * FROM jobs_claim_on(v_shards[1], worker, max_jobs, queues, lease);
        RETURN;
    END IF;
    v_start := floor(random() * v_count)::integer;
    FOR i IN 0 .. v_count - 1 LOOP
        v_shard := v_shards[1 + (v_start + i) % v_count];
        v_queues := CASE WHEN jobs_claim.queues IS NULL THEN NULL
                         ELSE ARRAY(SELECT q FROM unnest(jobs_claim.queues) AS q
                                    WHERE _jobs_proxy_queue_shard('jobs_claim', q, false) = v_shard) END;
        BEGIN
            RETURN QUERY SELECT * FROM jobs_claim_on(v_shard, worker, v_remaining, v_queues, lease);
            GET DIAGNOSTICS v_got = ROW_COUNT;
            v_answered := true;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT;
            IF NOT _jobs_proxy_unreachable(v_state, v_message) THEN
                IF v_claimed = 0 THEN
                    RAISE;
                END IF;
                -- The rows already returned are claimed on their shards: hand them over.
                RAISE WARNING 'skiplock proxy: jobs_claim stopped at shard % after claiming % jobs on other shards: % (SQLSTATE %)',
                    v_shard, v_claimed, v_message, v_state;
                RETURN;
            END IF;
            RAISE WARNING 'skiplock proxy: jobs_claim skipped shard %: %', v_shard, v_message;
            v_got := 0;
        END;
        v_claimed := v_claimed + v_got;
        v_remaining := v_remaining - v_got;
        EXIT WHEN v_remaining <= 0;
    END LOOP;
    IF NOT v_answered AND v_message IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
    END IF;
END;
$$;
