"""What only one dialect has: SQLite files, PostgreSQL pools and hosts, backups, upgrades."""
