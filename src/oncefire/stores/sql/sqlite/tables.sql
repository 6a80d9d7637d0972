-- Triggers on the application's own tables (docs/tables.md).
--
-- The row_*_trigger queries are templates: `tables.fill` replaces each {name} in them with a
-- quoted identifier, a quoted string literal, or a list of them built from the table's
-- columns (SQLite triggers cannot read a whole row, so the columns are named one by one).
-- Nothing else is put into them. Each trigger is ONE insert into oncefire_row_changes
-- (migration 016), in the application's transaction: a table with no index but its rowid,
-- so the write pays for no index of the outbox. The workers move the changes into
-- oncefire_events, marked 'new', and route them (move_row_changes, docs/architecture.md).
-- The time is the database's clock (a trigger has no other); the event id is made from it and
-- the change's rowid when the change is moved. n, which schema 18 filled with total_changes(),
-- is not read since schema 25: triggers made since write 0.

-- name: table_columns
SELECT name, type, pk FROM pragma_table_info(:table) ORDER BY cid;

-- name: table_exists
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = :table;

-- name: watched_tables
SELECT name, kinds, columns, shape, watched_at FROM oncefire_watched_tables ORDER BY name;

-- name: save_watched_table
INSERT INTO oncefire_watched_tables (name, kinds, columns, shape, watched_at)
VALUES (:name, :kinds, :columns, :shape, :now)
ON CONFLICT (name) DO UPDATE SET kinds = excluded.kinds, columns = excluded.columns,
    shape = excluded.shape, watched_at = excluded.watched_at;

-- name: forget_watched_table
DELETE FROM oncefire_watched_tables WHERE name = :name;

-- name: move_row_changes
-- The oldest :limit row changes into the outbox, marked 'new' for routing: the id a UUIDv7 of
-- the capture's time, its next 26 bits the change's place in the order of capture (seq, plus
-- the seq of the changes moved before the table last emptied, as a rowid starts again at 1 in
-- an empty table: oncefire_row_changes_moved, migration 025), then random ones. So updates of
-- one row in the same millisecond, from any connections, are routed in order (unless those
-- bits wrap around between them, once in 67 million changes). Schema 18 made those bits of
-- the capturing connection's total_changes(), which two connections do not share.
INSERT INTO oncefire_events (id, type, source, time, data, size, routing)
SELECT printf('%08x-%04x-7%03x-%04x-%012x', ms >> 16, ms & 65535, ((m.moved + seq) >> 14) & 4095,
        ((m.moved + seq) & 16383) | 32768, random() & 281474976710655),
    type, source, ms / 1000.0, data, length(CAST(data AS BLOB)), 'new'
FROM oncefire_row_changes, oncefire_row_changes_moved AS m
WHERE seq <= (SELECT max(seq) FROM (SELECT seq FROM oncefire_row_changes ORDER BY seq LIMIT :limit))
ORDER BY seq;

-- name: count_moved_row_changes
-- Before a move that empties the table is forgotten: the next change's rowid will be 1 again.
UPDATE oncefire_row_changes_moved SET moved = moved + (SELECT max(seq) FROM oncefire_row_changes)
WHERE EXISTS (SELECT 1 FROM oncefire_row_changes)
    AND (SELECT count(*) FROM (SELECT 1 FROM oncefire_row_changes LIMIT :limit + 1)) <= :limit;

-- name: row_changes_with_bytes
-- The changes the next move takes whose rows hold bytes (tagged by row_value).
SELECT seq, data FROM oncefire_row_changes
WHERE seq <= (SELECT max(seq) FROM (SELECT seq FROM oncefire_row_changes ORDER BY seq LIMIT :limit))
    AND instr(data, '{"$hex":') > 0;

-- name: set_row_change_data
UPDATE oncefire_row_changes SET data = :data WHERE seq = :seq;

-- name: forget_row_changes
-- The changes move_row_changes moved, in the same transaction.
DELETE FROM oncefire_row_changes
WHERE seq <= (SELECT max(seq) FROM (SELECT seq FROM oncefire_row_changes ORDER BY seq LIMIT :limit));

-- name: drop_row_trigger
DROP TRIGGER IF EXISTS {trigger};

-- name: row_inserted_trigger
CREATE TRIGGER {trigger} AFTER INSERT ON {table}
BEGIN
    INSERT INTO oncefire_row_changes (ms, n, type, source, data)
    VALUES (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), 0,
        'row.inserted', {source_new},
        json_object('table', {name}, 'pk', json_object({pk_new}), 'before', NULL,
            'after', json_object({row_new})));
END;

-- name: row_updated_trigger
CREATE TRIGGER {trigger} AFTER UPDATE{update_of} ON {table} WHEN {changed}
BEGIN
    INSERT INTO oncefire_row_changes (ms, n, type, source, data)
    VALUES (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), 0,
        'row.updated', {source_new},
        json_object('table', {name}, 'pk', json_object({pk_new}),
            'before', json_object({row_old}), 'after', json_object({row_new})));
END;

-- name: row_deleted_trigger
CREATE TRIGGER {trigger} AFTER DELETE ON {table}
BEGIN
    INSERT INTO oncefire_row_changes (ms, n, type, source, data)
    VALUES (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), 0,
        'row.deleted', {source_old},
        json_object('table', {name}, 'pk', json_object({pk_old}),
            'before', json_object({row_old}), 'after', NULL));
END;

-- How a trigger puts one column {value} (NEW."col" or OLD."col") into the JSON of a row, the
-- way PostgreSQL's to_jsonb does (docs/tables.md, "Types"), chosen by the declared type.

-- name: row_value
-- Any other column: as stored, except bytes, which JSON cannot hold and a trigger cannot
-- write as base64: tagged {"$hex": "..."}, which the move makes base64 (row_changes_with_bytes).
CASE WHEN typeof({value}) = 'blob' THEN json_object('$hex', hex({value})) ELSE {value} END

-- name: row_value_numeric
-- A column declared NUMERIC or DECIMAL: a number as a string of its digits, as PostgreSQL
-- writes a numeric: with the declared scale ({whole} and {fraction} are '%.2f' for
-- NUMERIC(10, 2)); with none, an integer whole and a float in up to 15 digits ('%!.15g').
CASE WHEN typeof({value}) = 'integer' THEN {whole}
    WHEN typeof({value}) = 'real' THEN printf({fraction}, {value})
    WHEN typeof({value}) = 'blob' THEN json_object('$hex', hex({value}))
    ELSE {value} END

-- name: row_value_bool
-- A column declared BOOL*: true or false, as SQLite stores 1 and 0.
json(CASE WHEN {value} IS NULL THEN 'null' WHEN {value} THEN 'true' ELSE 'false' END)

-- name: row_value_time
-- A column declared with TIME in its type: a text 'YYYY-MM-DD HH:MM:SS[.ffffff]' with no zone
-- (as SQLAlchemy writes a datetime) becomes ISO 8601 in UTC, its fraction trimmed of zeros,
-- as PostgreSQL writes a timestamp; a value with a zone, or any other, is left as stored.
CASE WHEN typeof({value}) = 'text'
        AND {value} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][ T][0-9][0-9]:[0-9][0-9]:[0-9][0-9]*'
        AND NOT {value} GLOB '*[+Z]*' AND NOT {value} GLOB '*-[0-9][0-9]:[0-9][0-9]'
    THEN substr({value}, 1, 10) || 'T'
        || substr(CASE WHEN instr({value}, '.') THEN rtrim(rtrim({value}, '0'), '.') ELSE {value} END, 12)
        || '+00:00'
    WHEN typeof({value}) = 'blob' THEN json_object('$hex', hex({value}))
    ELSE {value} END
