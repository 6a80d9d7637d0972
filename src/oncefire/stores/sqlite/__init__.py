"""SQLite: the store (store.py) and what only SQLite needs: connections, backup, files."""
