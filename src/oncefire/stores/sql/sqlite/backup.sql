-- Online backups of a store and restores (stores/sqlite/backup.py).

-- name: backup_into
-- A consistent copy of the store as of one read transaction, into a new file. In WAL mode
-- writers go on meanwhile; checkpoints wait past its snapshot until it ends.
VACUUM INTO :dest;

-- name: integrity_check
PRAGMA integrity_check;

-- name: live_leases
-- Deliveries some worker runs now: a store that has any is in use.
SELECT count(*) FROM oncefire_deliveries WHERE state = 'running' AND lease_until > :now;
