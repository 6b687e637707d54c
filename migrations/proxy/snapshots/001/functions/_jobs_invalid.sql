-- _jobs_invalid: raises the error every jobs_* function gives for a bad argument.
--
-- Promises: always raises SQLSTATE 22023 (invalid_parameter_value) with the message
--           '<function>: <parameter> <problem>' and the parameter's name in the error's
--           COLUMN field, so clients can tell which argument was wrong without parsing text.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_invalid(func text, param text, problem text)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('%s: %s %s', _jobs_invalid.func, _jobs_invalid.param, _jobs_invalid.problem),
        COLUMN  = _jobs_invalid.param;
END;
$$;

COMMENT ON FUNCTION _jobs_invalid(text, text, text) IS
    'skiplock (private): raises SQLSTATE 22023 naming the bad parameter.';
