-- oncefire schema 13: triggers on the application's own tables (docs/tables.md).
-- One row per watched table: what its triggers capture, and the table's columns when they
-- were made (SQLite triggers name each column, so a changed table needs them made again).
CREATE TABLE oncefire_watched_tables (
    name TEXT PRIMARY KEY,          -- the table as functions name it
    kinds TEXT NOT NULL,            -- the changes captured: 'inserted,updated,deleted'
    columns TEXT,                   -- updates captured only when one of these changed; NULL: any
    shape TEXT NOT NULL,            -- the table's columns and primary key, as the triggers saw them
    watched_at REAL NOT NULL
);
