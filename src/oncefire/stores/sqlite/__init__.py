"""SQLite: the store (store.py) and what only SQLite needs: connections, files, the wake-up
watch on the WAL file (filewatch.py) and online backups."""
