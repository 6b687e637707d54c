-- _jobs_check_fence_arrays: validates the (ids, attempts) arrays of the batch functions.
--
-- Promises: returns when ids and attempts are non-NULL, one-dimensional, equally long, at
--           most 100000 elements and free of NULLs; otherwise raises 22023 through
--           _jobs_invalid.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_check_fence_arrays(func text, ids bigint[], attempts integer[])
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    IF _jobs_check_fence_arrays.ids IS NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must not be NULL');
    END IF;
    IF _jobs_check_fence_arrays.attempts IS NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must not be NULL');
    END IF;
    IF array_ndims(_jobs_check_fence_arrays.ids) > 1 THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must be a one-dimensional array');
    END IF;
    IF array_ndims(_jobs_check_fence_arrays.attempts) > 1 THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must be a one-dimensional array');
    END IF;
    IF cardinality(_jobs_check_fence_arrays.ids) <> cardinality(_jobs_check_fence_arrays.attempts) THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must have as many elements as ids');
    END IF;
    IF cardinality(_jobs_check_fence_arrays.ids) > 100000 THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must have at most 100000 elements');
    END IF;
    IF array_position(_jobs_check_fence_arrays.ids, NULL) IS NOT NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'ids', 'must not contain NULL');
    END IF;
    IF array_position(_jobs_check_fence_arrays.attempts, NULL) IS NOT NULL THEN
        PERFORM _jobs_invalid(_jobs_check_fence_arrays.func, 'attempts', 'must not contain NULL');
    END IF;
END;
$$;

COMMENT ON FUNCTION _jobs_check_fence_arrays(text, bigint[], integer[]) IS
    'skiplock (private): validates the ids/attempts arrays of the batch functions.';
