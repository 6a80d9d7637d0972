-- How each connection is set up, and its transactions.

-- name: incremental_auto_vacuum
-- Set on every connection: it takes effect only before the file's first table (a new store),
-- so retention's deletes can give pages back a few at a time. An older store switches once
-- with VACUUM (see docs/retention.md).
PRAGMA auto_vacuum = INCREMENTAL;

-- name: wal_mode
PRAGMA journal_mode = WAL;

-- name: synchronous_full
-- FULL: an acknowledged commit survives power loss.
PRAGMA synchronous = FULL;

-- name: synchronous_normal
-- NORMAL: an explicit opt-in (a power loss may lose the last commits, never corrupt).
PRAGMA synchronous = NORMAL;

-- name: short_busy_timeout
-- Write transactions wait in the store's own loop; a short wait here covers the rest (a
-- reader meeting a checkpoint), without SQLite's long naps.
PRAGMA busy_timeout = 20;

-- name: begin_immediate
BEGIN IMMEDIATE;

-- name: begin_deferred
BEGIN DEFERRED;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;
