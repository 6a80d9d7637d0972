"""The scale-out store: PostgreSQL through psycopg 3 and a pool, shared by any number of workers.

PostgresStore joins the queue and documents on PostgreSQL (queue/postgres.py,
documents/postgres.py) and what is the same on SQLite (SqlStore); here: the pool and its
transactions, the listener, migrations and the database clock. Every statement goes to the
one server the URL names: no decision reads a replica.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from oncefire.clock import Clock
from oncefire.model import codec
from oncefire.stores import queries
from oncefire.stores.catalogue.cache import CatalogCache
from oncefire.stores.catalogue.tables import PostgresTableTriggers, TableTriggers
from oncefire.stores.connection import Statements
from oncefire.stores.documents.postgres import PostgresDocuments
from oncefire.stores.documents.postgres_tx import lock_key
from oncefire.stores.postgres.clock import DatabaseClock
from oncefire.stores.postgres.listener import Listener
from oncefire.stores.postgres.pool import POOL_MAX, POOL_MIN, Pool, PooledStatements
from oncefire.stores.postgres.statements import PostgresStatements
from oncefire.stores.queue.postgres import PostgresQueue
from oncefire.stores.sql_store import SqlStore

SQL = queries.load("postgres")


class PostgresStore(PostgresQueue, PostgresDocuments, SqlStore):
    """oncefire's state in a PostgreSQL database, shared by workers on many machines."""

    dialect = "postgres"

    def __init__(
        self,
        url: str,
        *,
        pool_min: int = POOL_MIN,
        pool_max: int = POOL_MAX,
        beside_tables: bool = False,
        is_replica: bool = False,
        **pool: Any,
    ) -> None:
        """beside_tables: create the schema even in a database holding tables of its own;
        is_replica: a read replica (Settings.read_store), read only, its schema the primary's;
        pool: more of the Pool's options (retry_window)."""
        self.url = url
        self.pool = Pool(
            url, min_size=pool_min, max_size=pool_max, is_writer=not is_replica, **pool
        )
        self._pooled = PooledStatements(self.pool)
        self._unflushed_pooled = PooledStatements(self.pool, flushed=False)
        self._listener = Listener(url)
        self._catalogs = CatalogCache()  # functions and index fields, between transactions
        self.database_clock = DatabaseClock(
            lambda: float(self._pooled.fetch("database_time")[0][0])
        )
        self.tables: TableTriggers = PostgresTableTriggers(self._write, SQL)
        try:
            self.check_replica() if is_replica else self.migrate(beside_tables=beside_tables)
        except BaseException:
            self.close()
            raise

    # -- connections -------------------------------------------------------------------

    def _one(self) -> PooledStatements:
        return self._pooled

    def _unflushed(self) -> PooledStatements:
        return self._unflushed_pooled

    @contextmanager
    def _write(self) -> Iterator[PostgresStatements]:
        with self.pool.transaction("begin_bounded") as conn:
            yield PostgresStatements(conn, SQL)

    @contextmanager
    def _snapshot(self) -> Iterator[PostgresStatements]:
        with self.pool.snapshot() as conn:
            yield PostgresStatements(conn, SQL)

    def _bury_pending_of(self, st: Statements, args: dict[str, Any]) -> int:
        """One statement buries them and adds them to the dead-letter counter, the counter's row
        trigger off meanwhile (schema 21): its upserts of one row in one transaction are
        quadratic in PostgreSQL's row versions, where a forgotten function may have a backlog
        of a million."""
        st.execute("dead_counts_by_statement")
        ((buried,),) = st.fetch("bury_pending_of", args)
        st.execute("dead_counts_by_row")
        return int(buried)

    def use_clock(self, clock: Clock) -> None:
        """Write and judge lease times by the database's clock when clock is the system
        clock (see postgres_clock.py)."""
        self.database_clock.follow(clock)

    def _decode(self, value: Any) -> Any:
        return codec.decoded(value)  # jsonb comes back decoded, through oncefire's codec

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Store calls this thread makes inside the block share one transaction."""
        with self.pool.batch():
            yield

    def reopen_if_moved(self) -> bool:
        """A database server has no file to lose: always False."""
        return False

    def close(self) -> None:
        """Close the listener and the pool."""
        self._listener.close()
        self.pool.close()

    # -- schema ------------------------------------------------------------------------

    def _lock_schema(self, st: Statements) -> None:
        st.execute("lock_migrations", {"key": lock_key("migrate", "schema")})

    def _run_script(self, st: Any, sql: str) -> None:
        st.conn.execute(sql.encode())  # a script: no parameters, several statements
