-- What a store URL points at (stores/probe.py): the tables of the database.

-- name: probe_table_names
SELECT name FROM sqlite_master WHERE type = 'table';
