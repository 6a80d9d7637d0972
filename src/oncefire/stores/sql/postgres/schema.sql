-- Bookkeeping of the numbered migrations (the migrations themselves are 001_... files).

-- name: lock_migrations
-- Concurrent first use: one process migrates, the others wait here and find it done.
SELECT pg_advisory_xact_lock(%(key)s);

-- name: create_schema_table
CREATE TABLE IF NOT EXISTS oncefire_schema (version integer NOT NULL);

-- name: schema_version
SELECT max(version) FROM oncefire_schema;

-- name: record_schema_version
INSERT INTO oncefire_schema (version) VALUES (%(version)s);

-- name: listen
-- The channel every pg_notify of these files names.
LISTEN oncefire;

-- name: backend_pid
SELECT pg_backend_pid();

-- name: begin
BEGIN;

-- name: begin_snapshot
-- A read-only transaction that sees one moment of the database.
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;
