-- oncefire schema 13: triggers on the application's own tables (docs/tables.md).
-- One row per watched table: what its triggers capture, and the table's columns when they
-- were made (the trigger function reads whole rows, so a new column needs no change).
CREATE TABLE oncefire_watched_tables (
    name text PRIMARY KEY,          -- the table as functions name it ('orders', 'sales.orders')
    kinds text NOT NULL,            -- the changes captured: 'inserted,updated,deleted'
    columns text,                   -- updates captured only when one of these changed; NULL: any
    shape text NOT NULL,            -- the table's columns and primary key, as the triggers saw them
    watched_at double precision NOT NULL
);

-- The one trigger function of every watched table: one INSERT into the outbox, in the
-- application's transaction, marked 'new' for the workers to route (docs/architecture.md).
-- TG_ARGV: the table as functions name it, its primary key columns in order, then '' and its
-- `timestamp without time zone` columns, which get the zone UTC (docs/tables.md, "Types";
-- the function runs in UTC so timestamptz values are written with +00:00).
-- The id is a UUIDv7 (time-sorted; its random part from random(), cheaper than a UUID), the
-- time the database's clock (a trigger has no other), the size the jsonb's (pg_column_size:
-- the text form would cost a conversion of each row).
-- Used by UPDATE triggers; INSERT and DELETE use oncefire_rows_event below.
CREATE OR REPLACE FUNCTION oncefire_row_event() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT SET TimeZone TO 'UTC' AS $$
DECLARE
    ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    stamp text := lpad(to_hex(ms), 12, '0');
    old_row jsonb;
    new_row jsonb;
    pk jsonb := '{}';
    source text := TG_ARGV[0];
    is_key boolean := true;
    col text;
    data jsonb;
BEGIN
    IF TG_OP <> 'INSERT' THEN old_row := to_jsonb(OLD); END IF;
    IF TG_OP <> 'DELETE' THEN new_row := to_jsonb(NEW); END IF;
    FOR i IN 1 .. TG_NARGS - 1 LOOP
        col := TG_ARGV[i];
        IF col = '' THEN
            is_key := false;
        ELSIF is_key THEN
            pk := pk || jsonb_build_object(col, coalesce(new_row, old_row) -> col);
            source := source || '/' || coalesce(coalesce(new_row, old_row) ->> col, '');
        ELSE
            IF old_row ->> col IS NOT NULL THEN
                old_row := jsonb_set(old_row, ARRAY[col], to_jsonb((old_row ->> col) || '+00:00'));
            END IF;
            IF new_row ->> col IS NOT NULL THEN
                new_row := jsonb_set(new_row, ARRAY[col], to_jsonb((new_row ->> col) || '+00:00'));
            END IF;
        END IF;
    END LOOP;
    data := jsonb_build_object('table', TG_ARGV[0], 'pk', pk, 'before', old_row, 'after', new_row);
    INSERT INTO oncefire_events (id, type, source, time, data, size, routing)
    VALUES (substr(stamp, 1, 8) || '-' || substr(stamp, 9, 4) || '-7'
            || lpad(to_hex((random() * 4095)::int), 3, '0') || '-'
            || to_hex(32768 + (random() * 16383)::int) || '-'
            || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'),
        CASE TG_OP WHEN 'INSERT' THEN 'row.inserted' WHEN 'UPDATE' THEN 'row.updated'
            ELSE 'row.deleted' END,
        source, ms / 1000.0, data, pg_column_size(data), 'new');
    RETURN NULL;
END
$$;

-- The same for a whole INSERT or DELETE statement at once, from its transition table: one
-- INSERT ... SELECT into the outbox rather than one function call per row, which is what a
-- many-row statement costs. UPDATE triggers stay per row: PostgreSQL allows no transition
-- table on a trigger with a column list (UPDATE OF), which keeps unwatched updates free.
-- The id's bits after the time are the row's number in the statement, then random ones: the
-- statement's events go into the index in order.
CREATE OR REPLACE FUNCTION oncefire_rows_event() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT SET TimeZone TO 'UTC' AS $$
DECLARE
    ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    stamp text := lpad(to_hex(ms), 12, '0');
    prefix text := substr(stamp, 1, 8) || '-' || substr(stamp, 9, 4) || '-7';
    keys text[] := '{}';
    naive text[] := '{}';
    is_key boolean := true;
BEGIN
    FOR i IN 1 .. TG_NARGS - 1 LOOP
        IF TG_ARGV[i] = '' THEN
            is_key := false;
        ELSIF is_key THEN
            keys := keys || TG_ARGV[i];
        ELSE
            naive := naive || TG_ARGV[i];
        END IF;
    END LOOP;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO oncefire_events (id, type, source, time, data, size, routing)
        SELECT prefix || lpad(to_hex((n >> 14) & 4095), 3, '0') || '-'
                || to_hex(32768 + (n & 16383)) || '-'
                || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'),
            'row.inserted', source, ms / 1000.0, data, pg_column_size(data), 'new'
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
            FROM (SELECT CASE WHEN cardinality(naive) = 0 THEN to_jsonb(n)
                ELSE oncefire_utc(to_jsonb(n), naive) END AS r, row_number() OVER () AS n
                FROM oncefire_new AS n) AS x
        ) AS y;
    ELSE
        INSERT INTO oncefire_events (id, type, source, time, data, size, routing)
        SELECT prefix || lpad(to_hex((n >> 14) & 4095), 3, '0') || '-'
                || to_hex(32768 + (n & 16383)) || '-'
                || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'),
            'row.deleted', source, ms / 1000.0, data, pg_column_size(data), 'new'
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
            FROM (SELECT CASE WHEN cardinality(naive) = 0 THEN to_jsonb(o)
                ELSE oncefire_utc(to_jsonb(o), naive) END AS r, row_number() OVER () AS n
                FROM oncefire_old AS o) AS x
        ) AS y;
    END IF;
    RETURN NULL;
END
$$;

-- A row's naive timestamps (`timestamp without time zone` columns) given the zone UTC.
CREATE OR REPLACE FUNCTION oncefire_utc(p_row jsonb, p_columns text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_row || coalesce(
        (SELECT jsonb_object_agg(c, (p_row ->> c) || '+00:00') FROM unnest(p_columns) AS c
         WHERE p_row ->> c IS NOT NULL), '{}')
$$;
