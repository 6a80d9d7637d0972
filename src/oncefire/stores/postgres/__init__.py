"""PostgreSQL: the store (store.py) and what only PostgreSQL needs: the pool, its hosts,
the listener, the database clock and statements on one connection."""

from oncefire.errors import MissingDependencyError

try:
    import psycopg  # noqa: F401 - imported first, so that its absence says what to install
    import psycopg_pool  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a test that hides psycopg
    raise MissingDependencyError(
        "PostgreSQL support needs psycopg 3 and psycopg-pool: pip install 'oncefire[postgres]'."
    ) from exc
