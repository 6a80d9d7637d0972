-- oncefire schema 23: less work for a table trigger in the application's transaction
-- (docs/tables.md, "Cost"). Measured with pgbench on one-row INSERTs, the schema 18 trigger
-- function spent most of its time on what the workers can do as well:
-- - its `SET search_path FROM CURRENT SET TimeZone TO 'UTC'` (about 20 and 45 µs a call): the
--   functions now name oncefire's tables with their schema, and write a timestamptz in UTC
--   themselves, whatever the session's zone;
-- - reading the table's typed columns through a SQL function (about 90 µs, a plan made again
--   each call): a probe in the trigger function, whose plan is kept, finds most tables have
--   none, and only tables that have them pay for the rewrite of those values;
-- - the event's source, its key object and the wrapping of the rows: the change keeps the
--   rows and the trigger's arguments (the table as functions name it, its key columns), and
--   the workers make the event's source and data when they move it (move_row_changes).
-- A row's values are still made JSON in the trigger, with the table's types of that moment:
-- a column changed later cannot change how a captured value is written.

-- 1. Changes captured by the schema 18 functions and not moved yet: moved now, as the schema
--    22 move did, so the table can take its new shape.
WITH moved AS (
    DELETE FROM oncefire_row_changes RETURNING ms, n, type, source, data
)
INSERT INTO oncefire_events (id, type, source, time, data, size, routing)
SELECT substr(stamp, 1, 8) || '-' || substr(stamp, 9, 4) || '-7'
        || lpad(to_hex(coalesce((n >> 14) & 4095, (random() * 4095)::int)), 3, '0') || '-'
        || to_hex(32768 + coalesce(n & 16383, (random() * 16383)::int)) || '-'
        || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'),
    type, source, ms / 1000.0, data, pg_column_size(data), 'new'
FROM (SELECT lpad(to_hex(ms), 12, '0') AS stamp, * FROM moved) AS m;

-- 2. The change as a trigger writes it. seq: the order of capture, from which the event id
-- is made (schema 18 made it of the row's number in its statement, or at random for a per-row
-- trigger, so two updates of one row in the same millisecond could be routed out of order);
-- table_name: the table as functions name it; keys: the trigger's arguments after it, its key
-- columns in order (a trigger made by schema 13 passes an empty one and more after: the move
-- reads up to the empty one); before, after: the rows.
DROP TABLE oncefire_row_changes;
CREATE TABLE oncefire_row_changes (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    ms bigint NOT NULL,
    type text NOT NULL,
    table_name text NOT NULL,
    keys text[] NOT NULL,
    before jsonb,
    after jsonb
);

-- 3. A row's values written the same way on both databases (docs/tables.md, "Types"): given
-- the table's columns of the types to_jsonb writes otherwise and their types, naive timestamps
-- get the zone UTC (infinities stay as they are), timestamptz values (to_jsonb writes them in the session's zone) are written
-- in UTC, numerics become strings of their digits, bytes base64 (to_jsonb writes '\x' hex).
-- PL/pgSQL, whose plans a session keeps: a SQL function with a subquery is planned each call.
DROP FUNCTION IF EXISTS oncefire_row_values(jsonb, text[], text[], text[]);
DROP FUNCTION IF EXISTS oncefire_typed_columns(oid);
CREATE OR REPLACE FUNCTION oncefire_row_values(p_row jsonb, p_columns text[], p_types oid[])
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN p_row || coalesce((SELECT jsonb_object_agg(c, CASE
        WHEN t IN ('timestamp'::regtype, 'timestamptz'::regtype) AND p_row ->> c LIKE '%infinity'
            THEN p_row -> c
        WHEN t = 'timestamp'::regtype THEN to_jsonb((p_row ->> c) || '+00:00')
        WHEN t = 'timestamptz'::regtype THEN to_jsonb(
            to_jsonb((p_row ->> c)::timestamptz AT TIME ZONE 'UTC') #>> '{}' || '+00:00')
        WHEN t = 'numeric'::regtype THEN to_jsonb(p_row ->> c)
        ELSE to_jsonb(translate(encode(decode(substr(p_row ->> c, 3), 'hex'), 'base64'),
            E'\n', ''))
        END) FROM unnest(p_columns, p_types) AS u (c, t)
        WHERE jsonb_typeof(p_row -> c) <> 'null'), '{}');
END
$$;

-- 4. The trigger functions, made with oncefire's schema written into them (a function-level
-- SET search_path would cost each call). TG_ARGV: the table as functions name it, then its
-- key columns. The time is the database's clock (a trigger has no other). A table's typed
-- columns are read from the catalogue when the trigger runs, so a column added or dropped
-- later needs no new trigger; most tables have none, and pay only for finding so.
DO $do$
BEGIN
    -- Used by UPDATE triggers, once per row (and by the per-row triggers of schema 13).
    EXECUTE format($fn$
        CREATE OR REPLACE FUNCTION oncefire_row_event() RETURNS trigger LANGUAGE plpgsql AS $body$
        DECLARE
            old_row jsonb;
            new_row jsonb;
            columns text[];
            types oid[];
        BEGIN
            IF TG_OP <> 'INSERT' THEN old_row := to_jsonb(OLD); END IF;
            IF TG_OP <> 'DELETE' THEN new_row := to_jsonb(NEW); END IF;
            columns := ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = TG_RELID
                AND attnum > 0 AND NOT attisdropped AND atttypid IN ('timestamp'::regtype,
                    'timestamptz'::regtype, 'numeric'::regtype, 'bytea'::regtype)
                ORDER BY attnum);
            IF columns <> '{}' THEN
                types := ARRAY(SELECT atttypid FROM pg_attribute WHERE attrelid = TG_RELID
                    AND attnum > 0 AND NOT attisdropped AND atttypid IN ('timestamp'::regtype,
                        'timestamptz'::regtype, 'numeric'::regtype, 'bytea'::regtype)
                    ORDER BY attnum);
                old_row := %1$I.oncefire_row_values(old_row, columns, types);
                new_row := %1$I.oncefire_row_values(new_row, columns, types);
            END IF;
            INSERT INTO %1$I.oncefire_row_changes (ms, type, table_name, keys, before, after)
            VALUES (floor(extract(epoch FROM clock_timestamp()) * 1000),
                CASE TG_OP WHEN 'INSERT' THEN 'row.inserted' WHEN 'UPDATE' THEN 'row.updated'
                    ELSE 'row.deleted' END,
                TG_ARGV[0], TG_ARGV[1:], old_row, new_row);
            RETURN NULL;
        END
        $body$ $fn$, current_schema());

    -- The same for a whole INSERT or DELETE statement at once, from its transition table: one
    -- INSERT ... SELECT rather than one function call per row.
    EXECUTE format($fn$
        CREATE OR REPLACE FUNCTION oncefire_rows_event() RETURNS trigger LANGUAGE plpgsql AS $body$
        DECLARE
            ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
            columns text[];
            types oid[];
        BEGIN
            columns := ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = TG_RELID
                AND attnum > 0 AND NOT attisdropped AND atttypid IN ('timestamp'::regtype,
                    'timestamptz'::regtype, 'numeric'::regtype, 'bytea'::regtype)
                ORDER BY attnum);
            IF columns <> '{}' THEN
                types := ARRAY(SELECT atttypid FROM pg_attribute WHERE attrelid = TG_RELID
                    AND attnum > 0 AND NOT attisdropped AND atttypid IN ('timestamp'::regtype,
                        'timestamptz'::regtype, 'numeric'::regtype, 'bytea'::regtype)
                    ORDER BY attnum);
            END IF;
            IF TG_OP = 'INSERT' THEN
                INSERT INTO %1$I.oncefire_row_changes (ms, type, table_name, keys, after)
                SELECT ms, 'row.inserted', TG_ARGV[0], TG_ARGV[1:], CASE WHEN types IS NULL
                    THEN to_jsonb(r) ELSE %1$I.oncefire_row_values(to_jsonb(r), columns, types) END
                FROM oncefire_new AS r;
            ELSE
                INSERT INTO %1$I.oncefire_row_changes (ms, type, table_name, keys, before)
                SELECT ms, 'row.deleted', TG_ARGV[0], TG_ARGV[1:], CASE WHEN types IS NULL
                    THEN to_jsonb(r) ELSE %1$I.oncefire_row_values(to_jsonb(r), columns, types) END
                FROM oncefire_old AS r;
            END IF;
            RETURN NULL;
        END
        $body$ $fn$, current_schema());
END
$do$;
