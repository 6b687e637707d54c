-- _jobs_cron_field: parses one field of a five-field cron expression into its values.
--
-- Promises: returns the sorted, distinct values the field selects, each within lo..hi.
--           A field is a comma-separated list of elements; an element is '*', a value, a
--           range 'a-b', or any of these followed by '/step' ('a/step' means a-hi/step).
--           Values are integers or, where names is given, names (case-insensitive, value
--           names_base + their position - 1, e.g. JAN = 1, SUN = 0). '*' and 'a/step' end
--           at star_hi, which is below hi only for day-of-week (7, another Sunday, is a
--           value, not part of the week).
-- Locks:    none. States: none.
-- Errors:   22023 naming the parameter cron and the field, through _jobs_invalid, for an
--           empty element, a value that is not a number or name, a value out of lo..hi, a
--           range whose start is after its end, or a step that is not 1..hi.
CREATE OR REPLACE FUNCTION _jobs_cron_field(
    func       text,
    cron       text,
    field      text,
    spec       text,
    lo         integer,
    hi         integer,
    names      text[],
    names_base integer,
    star_hi    integer
)
RETURNS integer[]
LANGUAGE plpgsql
IMMUTABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_element text;
    v_range   text;
    v_bounds  text[];
    v_parts   text[];
    v_first   integer;
    v_last    integer;
    v_step    integer;
    v_bound   text;
    v_value   integer;
    v_values  integer[] := '{}';
BEGIN
    FOREACH v_element IN ARRAY string_to_array(_jobs_cron_field.spec, ',') LOOP
        IF v_element = '' THEN
            PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                format('field %s has an empty list element in %L', _jobs_cron_field.field, _jobs_cron_field.cron));
        END IF;
        v_parts := string_to_array(v_element, '/');
        IF cardinality(v_parts) > 2 THEN
            PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                format('field %s: %L has more than one step in %L', _jobs_cron_field.field, v_element, _jobs_cron_field.cron));
        END IF;
        v_range := v_parts[1];
        v_step := 1;
        IF cardinality(v_parts) = 2 THEN
            -- The cast only runs on one to four digits: anything else is out of range.
            v_step := 0;
            IF v_parts[2] ~ '^[0-9]{1,4}$' THEN
                v_step := v_parts[2]::integer;
            END IF;
            IF v_step NOT BETWEEN 1 AND _jobs_cron_field.hi THEN
                PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                    format('field %s: step %L must be a number from 1 to %s in %L',
                           _jobs_cron_field.field, v_parts[2], _jobs_cron_field.hi, _jobs_cron_field.cron));
            END IF;
        END IF;

        IF v_range = '*' THEN
            v_first := _jobs_cron_field.lo;
            v_last := _jobs_cron_field.star_hi;
        ELSE
            v_bounds := string_to_array(v_range, '-');
            IF cardinality(v_bounds) > 2 THEN
                PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                    format('field %s: %L is not a value or range in %L', _jobs_cron_field.field, v_range, _jobs_cron_field.cron));
            END IF;
            FOR v_i IN 1 .. cardinality(v_bounds) LOOP
                v_bound := v_bounds[v_i];
                IF v_bound ~ '^[0-9]+$' THEN
                    -- Long digit strings are out of range, not integer overflows.
                    v_value := CASE WHEN length(v_bound) <= 4 THEN v_bound::integer ELSE 10000 END;
                ELSIF _jobs_cron_field.names IS NOT NULL
                      AND array_position(_jobs_cron_field.names, upper(v_bound)) IS NOT NULL THEN
                    v_value := array_position(_jobs_cron_field.names, upper(v_bound)) - 1 + _jobs_cron_field.names_base;
                ELSE
                    PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                        format('field %s: %L is not a number%s in %L', _jobs_cron_field.field, v_bound,
                               CASE WHEN _jobs_cron_field.names IS NOT NULL THEN ' or name' ELSE '' END,
                               _jobs_cron_field.cron));
                END IF;
                IF v_value NOT BETWEEN _jobs_cron_field.lo AND _jobs_cron_field.hi THEN
                    PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                        format('field %s: %s is out of range %s-%s in %L', _jobs_cron_field.field, v_bound,
                               _jobs_cron_field.lo, _jobs_cron_field.hi, _jobs_cron_field.cron));
                END IF;
                IF v_i = 1 THEN
                    v_first := v_value;
                END IF;
                v_last := v_value;
            END LOOP;
            -- 'a/step' runs from a to the end of the field's range.
            IF cardinality(v_bounds) = 1 AND cardinality(v_parts) = 2 THEN
                v_last := greatest(v_first, _jobs_cron_field.star_hi);
            END IF;
            IF v_first > v_last THEN
                PERFORM _jobs_invalid(_jobs_cron_field.func, 'cron',
                    format('field %s: range %L starts after it ends in %L', _jobs_cron_field.field, v_range, _jobs_cron_field.cron));
            END IF;
        END IF;
        v_values := v_values || ARRAY(SELECT generate_series(v_first, v_last, v_step));
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT v FROM unnest(v_values) AS v ORDER BY v);
END;
$$;

COMMENT ON FUNCTION _jobs_cron_field(text, text, text, text, integer, integer, text[], integer, integer) IS
    'skiplock (private): parses one cron field into its sorted values.';
