-- _jobs_parent_results: what a claim hands a job with parents as jobs_claimed.parent_results.
--
-- Promises: a JSON object with one key per parent that still exists: the parent's
--           workflow_step when the parent is a step of the child's own workflow
--           (workflow_id), else the parent's id as text (so that steps of two workflows with
--           the same name, or a step named like an id, never share a key); the value is the
--           parent's result (JSON null for none). NULL when no parent exists any more, and
--           NULL too when the results together are larger than a jsonb value can be (256 MB):
--           a claim must never fail for one job (it would block its whole queue); the handler
--           then reads each parent's result with jobs_result (jobs_get gives depends_on).
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_parent_results(workflow_id bigint, parents bigint[])
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_size bigint;
BEGIN
    -- Results that take less than 512 kB as stored (compressed or not) cannot overflow:
    -- neither pglz nor lz4 expands data more than 255 times. Larger ones are measured as the
    -- object would hold them (each result uncompressed, with a key of at most 200 bytes and
    -- its entry), rather than built and caught failing (a subtransaction per claimed child).
    SELECT sum(pg_column_size(p.result)) INTO v_size
    FROM jobs p
    WHERE p.id = ANY (_jobs_parent_results.parents);
    IF v_size >= 524288 THEN
        SELECT sum(pg_column_size(jsonb_build_array(p.result)) + 256) INTO v_size
        FROM jobs p
        WHERE p.id = ANY (_jobs_parent_results.parents);
        IF v_size > 268435455 THEN
            RETURN NULL;
        END IF;
    END IF;
    RETURN (SELECT jsonb_object_agg(CASE WHEN p.workflow_id = _jobs_parent_results.workflow_id
                                         THEN p.workflow_step ELSE p.id::text END,
                                    p.result)
            FROM jobs p
            WHERE p.id = ANY (_jobs_parent_results.parents));
END;
$$;

COMMENT ON FUNCTION _jobs_parent_results(bigint, bigint[]) IS
    'skiplock (private): a claimed job''s parents'' results, by step name within its workflow, else by id; NULL when too large.';
