-- oncefire schema 24: oncefire_json_float (migration 006) written so that PostgreSQL inlines it.
-- A SQL function is inlined into its caller's plan only if its SELECT has no FROM clause; the
-- schema 6 body read its argument's text from a subquery, so each call ran the function apart,
-- planned anew in every transaction: a document write called it two or four times, about
-- 50 µs of a write's 0.5 ms on the server (pgbench on oncefire_set_document, docs/scaling.md).
-- Same digits as before: float8's shortest exact text (extra_float_digits = 1, which
-- oncefire_set_document sets), integral values with ".0".
CREATE OR REPLACE FUNCTION oncefire_json_float(x double precision) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN x::text ~ '^-?[0-9]+$' THEN x::text || '.0' ELSE x::text END
$$;
