"""Stores: where oncefire records documents, events, deliveries and attempts."""

from __future__ import annotations

from oncefire.errors import ConfigError
from oncefire.settings import Settings
from oncefire.stores.base import Store


def open_store(settings: Settings, *, beside_tables: bool = False) -> Store:
    """The store named by settings.store (sqlite:///..., sqlite://:memory:, postgresql://...).
    Its schema is created or upgraded; beside_tables: even in a database that holds tables of
    its own and no oncefire schema (`oncefire migrate`), which is refused otherwise."""
    url = settings.store
    if url.startswith("sqlite:"):
        from oncefire.stores.sqlite.store import SqliteStore

        # A worker waiting for the write lock must still renew its leases before they run out.
        busy_wait = (settings.lease - settings.renew_every) / 2
        return SqliteStore(
            url,
            synchronous=settings.sqlite_synchronous,
            busy_wait=busy_wait,
            beside_tables=beside_tables,
        )
    if url.startswith(("postgresql:", "postgres:")):
        from oncefire.stores.postgres.store import PostgresStore

        return PostgresStore(
            url,
            pool_max=settings.concurrency + 2,
            beside_tables=beside_tables,
            retry_window=settings.store_retry_window,
        )
    raise ConfigError(
        f"Unknown store URL {url!r}: use sqlite:///path.db, sqlite://:memory: or "
        "postgresql://user@host/db."
    )


def open_read_store(settings: Settings) -> Store:
    """The read replica named by settings.read_store (PostgreSQL), opened read only: never
    migrated, its connections preferring a standby."""
    from oncefire.stores.postgres.store import PostgresStore

    return PostgresStore(
        settings.read_store,
        pool_max=settings.concurrency + 2,
        is_replica=True,
        retry_window=settings.store_retry_window,
    )
