-- What a store URL points at (stores/probe.py): the tables of the database.

-- name: probe_table_names
SELECT tablename FROM pg_tables WHERE schemaname = current_schema();
