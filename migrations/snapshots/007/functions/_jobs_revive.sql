-- _jobs_revive: brings back the descendants that the end of jobs just retried had cancelled.
--
-- Promises: ids are jobs that jobs_retry or jobs_retry_many just moved from dead or
--           cancelled back to queued or waiting. Each of their children that is cancelled
--           with cancelled_by naming them (the cascade of _jobs_finished did it, not an
--           operator) goes back to waiting (it still waits for that parent: its dependency was
--           never resolved), and so on down the graph: the children those had cancelled come
--           back too. A child with another parent that is dead or cancelled (and would
--           cancel it) stays cancelled, now in that parent's name (cancelled_by, last_error),
--           so that retrying that parent brings it back. A revived job with a unique_key
--           takes its key again; one whose key a live job holds stays cancelled (that job does
--           its work), so a retry of the parent does not fail for a descendant's key (only,
--           with 23505, for one a transaction not yet committed takes meanwhile).
-- Locks:    the revived rows. States: cancelled -> waiting.
CREATE OR REPLACE FUNCTION _jobs_revive(ids bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- Every statement finds its jobs by id (jobs_pkey) or its dependencies by jobs_dependencies'
-- indexes; a plan cached while the tables were small would scan them whole ever after.
SET enable_seqscan = off
-- With sequential scans off, a plan with a condition that no index serves is
-- costed at 1e10, far above jit_above_cost, so every call would JIT-compile its statements
-- (about 100 ms each time where JIT is available).
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[] := _jobs_revive.ids;
BEGIN
    WHILE cardinality(v_ids) > 0 LOOP
        -- A child that another parent's end would cancel now stays cancelled, in that
        -- parent's name: retrying that one brings it back.
        UPDATE jobs c
        SET cancelled_by = o.parent_id,
            last_error = format('parent %s ended %s', o.parent_id, o.state)
        FROM jobs_dependencies d,
             LATERAL (SELECT d2.parent_id, p2.state
                      FROM jobs_dependencies d2
                      JOIN jobs p2 ON p2.id = d2.parent_id
                      WHERE d2.child_id = d.child_id
                        AND NOT d2.resolved
                        AND d2.parent_id <> d.parent_id
                        AND p2.state IN ('dead', 'cancelled')
                      ORDER BY d2.parent_id
                      LIMIT 1) AS o
        WHERE d.parent_id = ANY (v_ids)
          AND NOT d.resolved
          AND c.id = d.child_id
          AND c.cancelled_by = d.parent_id
          AND c.state = 'cancelled';
        WITH revived AS (
            UPDATE jobs c
            SET state = 'waiting',
                finished_at = NULL,
                cancelled_by = NULL
            FROM jobs_dependencies d
            WHERE d.parent_id = ANY (v_ids)
              AND NOT d.resolved
              AND c.id = d.child_id
              AND c.cancelled_by = d.parent_id
              AND c.state = 'cancelled'
              -- A live job took the child's key meanwhile: that job does the child's work.
              AND (c.unique_key IS NULL
                   OR NOT EXISTS (SELECT FROM jobs_unique_keys k
                                  WHERE k.queue = c.queue AND k.unique_key = c.unique_key
                                    -- (a unique_for period of its own, or one that is over, gives way)
                                    AND NOT (k.held_until IS NOT NULL AND (k.id = c.id OR k.held_until <= now()))))
            RETURNING c.id, c.has_children
        )
        SELECT ARRAY(SELECT r.id FROM revived r WHERE r.has_children ORDER BY r.id) INTO v_ids;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION _jobs_revive(bigint[]) IS
    'skiplock (private): brings the descendants cancelled by the end of retried jobs back to waiting.';
