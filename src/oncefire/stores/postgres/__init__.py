"""PostgreSQL: the store (store.py) and what only PostgreSQL needs: the pool, its hosts,
the listener, the database clock and statements on one connection."""
