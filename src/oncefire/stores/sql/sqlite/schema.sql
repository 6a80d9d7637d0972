-- Bookkeeping of the numbered migrations (the migrations themselves are 001_... files).

-- name: create_schema_table
CREATE TABLE IF NOT EXISTS oncefire_schema (version INTEGER NOT NULL);

-- name: schema_version
SELECT max(version) FROM oncefire_schema;

-- name: write_schema_version
INSERT INTO oncefire_schema (version) VALUES (:version);
