-- oncefire schema 18: table triggers write their events into oncefire_row_changes, a table
-- with no index, and the workers move them into oncefire_events (keeper.route_new). A trigger's
-- insert then touches no index: the outbox's key and routing index are written outside the
-- application's transaction (docs/tables.md, "Cost").
-- ms: the database's clock when the change was captured (a trigger has no other); n: the row's
-- number in its statement (NULL for a per-row trigger), from which the event id is made.
CREATE TABLE oncefire_row_changes (
    ms bigint NOT NULL,
    n bigint,
    type text NOT NULL,
    source text NOT NULL,
    data jsonb NOT NULL
);

-- A row's values written the same way on both databases (docs/tables.md, "Types"): naive
-- timestamps (`timestamp without time zone`) given the zone UTC, numerics as strings of their
-- digits, bytes as base64 (to_jsonb writes numbers and '\x' hex).
CREATE OR REPLACE FUNCTION oncefire_row_values(
    p_row jsonb, p_naive text[], p_numeric text[], p_bytes text[]
) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT p_row || coalesce((SELECT jsonb_object_agg(c, v) FROM (
        SELECT c, to_jsonb((p_row ->> c) || '+00:00') AS v FROM unnest(p_naive) AS c
        WHERE p_row ->> c IS NOT NULL
        UNION ALL
        SELECT c, to_jsonb(p_row ->> c) FROM unnest(p_numeric) AS c
        WHERE jsonb_typeof(p_row -> c) = 'number'
        UNION ALL
        SELECT c, to_jsonb(translate(encode(decode(substr(p_row ->> c, 3), 'hex'), 'base64'),
                E'\n', ''))
        FROM unnest(p_bytes) AS c WHERE p_row ->> c IS NOT NULL
    ) AS x), '{}')
$$;

-- A table's columns whose values oncefire_row_values rewrites, read from the catalogue when
-- a trigger runs, so a column added or dropped later needs no new trigger.
CREATE OR REPLACE FUNCTION oncefire_typed_columns(
    p_table oid, OUT naive text[], OUT numerics text[], OUT bytes text[]
) LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(attname::text) FILTER (WHERE atttypid = 'timestamp'::regtype), '{}'),
        coalesce(array_agg(attname::text) FILTER (WHERE atttypid = 'numeric'::regtype), '{}'),
        coalesce(array_agg(attname::text) FILTER (WHERE atttypid = 'bytea'::regtype), '{}')
    FROM pg_attribute
    WHERE attrelid = p_table AND attnum > 0 AND NOT attisdropped
        AND atttypid IN ('timestamp'::regtype, 'numeric'::regtype, 'bytea'::regtype)
$$;

-- The trigger functions. TG_ARGV: the table as functions name it, then its primary key
-- columns in order (a trigger made by schema 13 passes more after an empty one: ignored).
-- They run in UTC, so timestamptz values are written with +00:00. The time is the database's
-- clock (a trigger has no other).

-- Used by UPDATE triggers, once per row; INSERT and DELETE use oncefire_rows_event below.
CREATE OR REPLACE FUNCTION oncefire_row_event() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT SET TimeZone TO 'UTC' AS $$
DECLARE
    ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    old_row jsonb;
    new_row jsonb;
    key_row jsonb;
    pk jsonb := '{}';
    source text := TG_ARGV[0];
    keys text[] := '{}';
    typed record;
    col text;
BEGIN
    FOR i IN 1 .. TG_NARGS - 1 LOOP
        EXIT WHEN TG_ARGV[i] = '';
        keys := keys || TG_ARGV[i];
    END LOOP;
    IF TG_OP <> 'INSERT' THEN old_row := to_jsonb(OLD); END IF;
    IF TG_OP <> 'DELETE' THEN new_row := to_jsonb(NEW); END IF;
    SELECT * INTO typed FROM oncefire_typed_columns(TG_RELID);
    IF cardinality(typed.naive) + cardinality(typed.numerics) + cardinality(typed.bytes) > 0 THEN
        old_row := oncefire_row_values(old_row, typed.naive, typed.numerics, typed.bytes);
        new_row := oncefire_row_values(new_row, typed.naive, typed.numerics, typed.bytes);
    END IF;
    key_row := coalesce(new_row, old_row);
    FOREACH col IN ARRAY keys LOOP
        pk := pk || jsonb_build_object(col, key_row -> col);
        source := source || '/' || coalesce(key_row ->> col, '');
    END LOOP;
    INSERT INTO oncefire_row_changes (ms, n, type, source, data)
    VALUES (ms, NULL, CASE TG_OP WHEN 'INSERT' THEN 'row.inserted' WHEN 'UPDATE' THEN 'row.updated'
            ELSE 'row.deleted' END, source,
        jsonb_build_object('table', TG_ARGV[0], 'pk', pk, 'before', old_row, 'after', new_row));
    RETURN NULL;
END
$$;

-- The same for a whole INSERT or DELETE statement at once, from its transition table: one
-- INSERT ... SELECT rather than one function call per row, which is what a many-row statement
-- costs. UPDATE triggers stay per row: PostgreSQL allows no transition table on a trigger
-- with a column list (UPDATE OF), which keeps unwatched updates free.
-- n, the row's number in the statement, becomes the id's bits after the time when a worker
-- moves the events: the statement's events go into the outbox's index in order.
CREATE OR REPLACE FUNCTION oncefire_rows_event() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT SET TimeZone TO 'UTC' AS $$
DECLARE
    ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    keys text[] := '{}';
    naive text[];
    numeric_columns text[];
    bytes text[];
    is_plain boolean;
BEGIN
    FOR i IN 1 .. TG_NARGS - 1 LOOP
        EXIT WHEN TG_ARGV[i] = '';
        keys := keys || TG_ARGV[i];
    END LOOP;
    SELECT * INTO naive, numeric_columns, bytes FROM oncefire_typed_columns(TG_RELID);
    is_plain := cardinality(naive) + cardinality(numeric_columns) + cardinality(bytes) = 0;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO oncefire_row_changes (ms, n, type, source, data)
        SELECT ms, n, 'row.inserted', source, data
        FROM (
            SELECT n, TG_ARGV[0] || CASE WHEN cardinality(keys) = 1
                    THEN '/' || coalesce(r ->> keys[1], '')
                    ELSE (SELECT string_agg('/' || coalesce(r ->> k, ''), '' ORDER BY o)
                        FROM unnest(keys) WITH ORDINALITY AS u (k, o)) END AS source,
                jsonb_build_object('table', TG_ARGV[0],
                    'pk', CASE WHEN cardinality(keys) = 1
                        THEN jsonb_build_object(keys[1], r -> keys[1])
                        ELSE (SELECT jsonb_object_agg(k, r -> k) FROM unnest(keys) AS k) END,
                    'before', NULL, 'after', r) AS data
            FROM (SELECT CASE WHEN is_plain THEN to_jsonb(n)
                    ELSE oncefire_row_values(to_jsonb(n), naive, numeric_columns, bytes) END AS r,
                    row_number() OVER () AS n
                FROM oncefire_new AS n) AS x
        ) AS y;
    ELSE
        INSERT INTO oncefire_row_changes (ms, n, type, source, data)
        SELECT ms, n, 'row.deleted', source, data
        FROM (
            SELECT n, TG_ARGV[0] || CASE WHEN cardinality(keys) = 1
                    THEN '/' || coalesce(r ->> keys[1], '')
                    ELSE (SELECT string_agg('/' || coalesce(r ->> k, ''), '' ORDER BY o)
                        FROM unnest(keys) WITH ORDINALITY AS u (k, o)) END AS source,
                jsonb_build_object('table', TG_ARGV[0],
                    'pk', CASE WHEN cardinality(keys) = 1
                        THEN jsonb_build_object(keys[1], r -> keys[1])
                        ELSE (SELECT jsonb_object_agg(k, r -> k) FROM unnest(keys) AS k) END,
                    'before', r, 'after', NULL) AS data
            FROM (SELECT CASE WHEN is_plain THEN to_jsonb(o)
                    ELSE oncefire_row_values(to_jsonb(o), naive, numeric_columns, bytes) END AS r,
                    row_number() OVER () AS n
                FROM oncefire_old AS o) AS x
        ) AS y;
    END IF;
    RETURN NULL;
END
$$;

DROP FUNCTION IF EXISTS oncefire_utc(jsonb, text[]);
