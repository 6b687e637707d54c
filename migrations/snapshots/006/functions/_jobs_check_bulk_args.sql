-- _jobs_check_bulk_args: validates the states and max_jobs arguments of the bulk actions.
--
-- Promises: returns when states is a non-empty array of states the action allows, without
--           NULLs, and max_jobs is at least 1; otherwise raises 22023 through _jobs_invalid,
--           naming states or max_jobs.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_check_bulk_args(func text, states jobs_state[], allowed jobs_state[], max_jobs integer)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF _jobs_check_bulk_args.states IS NULL THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states', 'must not be NULL');
    END IF;
    IF cardinality(_jobs_check_bulk_args.states) = 0 THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states', 'must not be empty');
    END IF;
    IF array_position(_jobs_check_bulk_args.states, NULL) IS NOT NULL THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states', 'must not contain NULL');
    END IF;
    IF NOT _jobs_check_bulk_args.states <@ _jobs_check_bulk_args.allowed THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'states',
                              'may only hold ' || array_to_string(_jobs_check_bulk_args.allowed, ', '));
    END IF;
    IF _jobs_check_bulk_args.max_jobs IS NULL OR _jobs_check_bulk_args.max_jobs < 1 THEN
        PERFORM _jobs_invalid(_jobs_check_bulk_args.func, 'max_jobs', 'must be at least 1');
    END IF;
END;
$$;

COMMENT ON FUNCTION _jobs_check_bulk_args(text, jobs_state[], jobs_state[], integer) IS
    'skiplock (private): raises 22023 for bad states or max_jobs of a bulk action.';
