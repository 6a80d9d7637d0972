-- Triggers on the application's own tables (docs/tables.md).
--
-- The row_*_trigger queries are templates: `tables.fill` replaces each {name} in them with a
-- quoted identifier, a quoted string literal, or a list of them built from the table's
-- columns. Nothing else is put into them. Every trigger runs oncefire_row_event() or
-- oncefire_rows_event() (migration 023) with the table's name and primary key columns as
-- arguments; they write into oncefire_row_changes, a table with no index, and the workers
-- move the changes into oncefire_events, marked 'new', and route them (move_row_changes).

-- name: table_columns
-- A table's columns in order, with their type and place in the primary key (0: not in it).
SELECT a.attname, format_type(a.atttypid, a.atttypmod),
    -- indkey is an int2vector, whose array starts at index 0
    coalesce(array_position(i.indkey::int2[], a.attnum) + 1 - array_lower(i.indkey::int2[], 1), 0)
FROM pg_attribute a
LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = to_regclass(%(table)s) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- name: table_exists
SELECT count(*) FROM pg_class WHERE oid = to_regclass(%(table)s) AND relkind IN ('r', 'p');

-- name: watched_tables
SELECT name, kinds, columns, shape, watched_at FROM oncefire_watched_tables ORDER BY name;

-- name: save_watched_table
INSERT INTO oncefire_watched_tables (name, kinds, columns, shape, watched_at)
VALUES (%(name)s, %(kinds)s, %(columns)s, %(shape)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET kinds = excluded.kinds, columns = excluded.columns,
    shape = excluded.shape, watched_at = excluded.watched_at;

-- name: forget_watched_table
DELETE FROM oncefire_watched_tables WHERE name = %(name)s;

-- name: move_row_changes
-- The oldest %(limit)s row changes (in the order of their capture) into the outbox, marked
-- 'new' for routing, in one statement. One worker moves at a time (a transaction's advisory
-- lock; another skips its move and routes what is moved), so changes reach routing, and get
-- their deliveries, in the order they were captured. The id is a UUIDv7 of the capture's time;
-- its next 26 bits the change's place in the order of capture (seq), then random ones: two
-- changes of one row in the same millisecond are routed in order (unless seq's low bits wrap
-- around between them, once in 67 million changes). The event's source (the table, then the
-- row's key values) and data are made here, not in the trigger (migration 023): keys are the
-- trigger's arguments after the table, up to an empty one (a trigger made by schema 13 passes
-- more).
WITH mover AS (
    SELECT pg_try_advisory_xact_lock(hashtext('oncefire'), hashtext('move_row_changes')) AS ok
), moved AS (
    DELETE FROM oncefire_row_changes
    WHERE (SELECT ok FROM mover) AND ctid = ANY (ARRAY(
        SELECT ctid FROM oncefire_row_changes ORDER BY seq LIMIT %(limit)s))
    RETURNING seq, ms, type, table_name,
        keys[1 : coalesce(array_position(keys, '') - 1, cardinality(keys))] AS keys,
        before, after
), made AS (
    SELECT seq, ms, type,
        table_name || coalesce((SELECT string_agg('/' || coalesce(coalesce(after, before) ->> k,
            ''), '' ORDER BY o) FROM unnest(keys) WITH ORDINALITY AS u (k, o)), '') AS source,
        jsonb_build_object('table', table_name,
            'pk', coalesce((SELECT jsonb_object_agg(k, coalesce(after, before) -> k)
                FROM unnest(keys) AS k), '{}'),
            'before', before, 'after', after) AS data
    FROM moved
)
INSERT INTO oncefire_events (id, type, source, time, data, size, routing)
SELECT substr(stamp, 1, 8) || '-' || substr(stamp, 9, 4) || '-7'
        || lpad(to_hex((seq >> 14) & 4095), 3, '0') || '-' || to_hex(32768 + (seq & 16383))
        || '-' || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'),
    type, source, ms / 1000.0, data, pg_column_size(data), 'new'
FROM (SELECT lpad(to_hex(ms), 12, '0') AS stamp, * FROM made) AS m;

-- name: row_changes_with_bytes
-- None: the trigger function writes bytes as base64 itself (SQLite's trigger cannot).
SELECT NULL::bigint, NULL::text WHERE false;

-- name: set_row_change_data
SELECT %(seq)s, %(data)s WHERE false;

-- name: count_moved_row_changes
-- Nothing: seq is an identity, which never starts again (SQLite's rowid does).
SELECT 1;

-- name: forget_row_changes
-- Nothing: move_row_changes deleted what it moved (SQLite's move takes two statements).
SELECT 1;

-- name: drop_row_trigger
DROP TRIGGER IF EXISTS {trigger} ON {table};

-- name: row_inserted_trigger
-- Per statement: one INSERT ... SELECT of its new rows into the outbox.
CREATE TRIGGER {trigger} AFTER INSERT ON {table} REFERENCING NEW TABLE AS oncefire_new
FOR EACH STATEMENT EXECUTE FUNCTION oncefire_rows_event({arguments});

-- name: row_updated_trigger
-- An UPDATE that changes none of the watched columns (or no column) emits nothing.
CREATE TRIGGER {trigger} AFTER UPDATE{update_of} ON {table}
FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION oncefire_row_event({arguments});

-- name: row_deleted_trigger
CREATE TRIGGER {trigger} AFTER DELETE ON {table} REFERENCING OLD TABLE AS oncefire_old
FOR EACH STATEMENT EXECUTE FUNCTION oncefire_rows_event({arguments});
