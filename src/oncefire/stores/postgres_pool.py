"""PostgreSQL connections for a store: a psycopg pool that outlives server restarts,
transactions on it, and driver errors turned into oncefire's, once, at this boundary."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

from oncefire import codec
from oncefire.errors import InvalidDocumentError, OncefireError, StoreError
from oncefire.stores.postgres_tx import Connection

POOL_MIN = 1
POOL_MAX = 10  # a worker's attempt threads (8 by default) + its loop + one spare
POOL_TIMEOUT = 5.0  # seconds to wait for a free connection before the call fails
RECONNECT_TIMEOUT = 5.0  # a lost connection is retried this long, then on the next demand
CONNECT_TIMEOUT = 5  # seconds (libpq counts whole seconds)


def failure(exc: psycopg.Error) -> OncefireError:
    """The oncefire error a driver error becomes, said in one sentence."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, psycopg.errors.UntranslatableCharacter) or "NUL (0x00)" in text:
        return InvalidDocumentError(
            "PostgreSQL cannot store the character U+0000 (NUL) in text or JSON: remove it, "
            "or encode such values (base64)."
        )
    if isinstance(exc, psycopg.errors.ProgramLimitExceeded):
        return StoreError(
            f"A key is too long for a PostgreSQL index ({text}): use shorter ids or keys."
        )
    if isinstance(exc, psycopg.errors.DeadlockDetected):
        return StoreError(
            "Two transactions waited on each other (a deadlock), and PostgreSQL ended this one: "
            "run it again, and write the same documents in the same order everywhere."
        )
    if isinstance(exc, psycopg.OperationalError):
        return StoreError(f"The PostgreSQL store is unavailable: {text}.")
    return StoreError(f"The PostgreSQL store failed: {text}.")


def connect_options(url: str, **defaults: Any) -> dict[str, Any]:
    """Connection options for url: ours, unless the URL sets them itself."""
    given = conninfo_to_dict(url)
    return {k: v for k, v in defaults.items() if k not in given}


def _configure(conn: Connection) -> None:
    # JSONB comes back through oncefire's codec, so datetimes round-trip as on SQLite.
    set_json_loads(codec.loads, conn)


class Pool:
    """Pooled connections to one server, each call on a connection known to be open."""

    def __init__(self, url: str, *, min_size: int = POOL_MIN, max_size: int = POOL_MAX) -> None:
        # One direct connection first, so a wrong URL or password fails at once, clearly.
        try:
            psycopg.connect(url, **connect_options(url, connect_timeout=CONNECT_TIMEOUT)).close()
        except psycopg.Error as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            raise StoreError(f"Cannot connect to the PostgreSQL store: {text}.") from exc
        self._local = threading.local()  # the connection of a batch() in progress, per thread
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={
                "autocommit": True,
                **connect_options(
                    url, connect_timeout=CONNECT_TIMEOUT, application_name="oncefire"
                ),
            },
            configure=_configure,
            timeout=POOL_TIMEOUT,
            reconnect_timeout=RECONNECT_TIMEOUT,
            num_workers=2,
            name="oncefire",
            open=False,
        )
        self._pool.open(wait=False)

    def take(self) -> Connection:
        """A pooled connection that is still open. One the server closed while it sat idle in
        the pool (a restart) is dropped, and another taken, without a round trip."""
        last: psycopg.Error | None = None
        for _ in range(self._pool.max_size + 1):
            try:
                conn = self._pool.getconn()
            except psycopg.Error as exc:
                raise StoreError(
                    f"No PostgreSQL connection came free within {POOL_TIMEOUT:g} s: is the "
                    f"server up? ({exc})"
                ) from exc
            try:
                # The server's goodbye, then end-of-file: the second read sees the close.
                conn.pgconn.consume_input()
                conn.pgconn.consume_input()
                return conn
            except psycopg.Error as exc:
                self._pool.putconn(conn)  # the pool replaces a closed connection
                last = exc
        assert last is not None
        raise failure(last) from last

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make this thread's calls share one transaction until the block ends."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self.transaction() as conn:
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    def give_back(self, conn: Connection) -> None:
        """Return a connection taken with take()."""
        self._pool.putconn(conn)

    @contextmanager
    def transaction(
        self, begin: str = "BEGIN", *, is_pipelined: bool = False
    ) -> Iterator[Connection]:
        """A transaction on a pooled connection: commits on exit, rolls back on an exception.
        Inside batch() it joins the batch's transaction. Pipelined, statements go to the
        server when a result is fetched or at the COMMIT, not one round trip each."""
        joined: Connection | None = getattr(self._local, "conn", None)
        if joined is not None:
            try:
                yield joined
            except psycopg.Error as exc:
                raise failure(exc) from exc
            return
        if is_pipelined:
            with self._pipelined(begin) as conn:
                yield conn
            return
        conn = self.take()
        try:
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                if not conn.broken:
                    with suppress(psycopg.Error):  # the pool drops what it cannot reset
                        conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            raise failure(exc) from exc
        finally:
            self._pool.putconn(conn)

    @contextmanager
    def _pipelined(self, begin: str) -> Iterator[Connection]:
        conn = self.take()
        try:
            with conn.pipeline():
                conn.execute(begin)
                yield conn
                conn.execute("COMMIT")
            # Leaving the pipeline syncs: an error of any queued statement is raised here.
        except psycopg.Error as exc:
            raise failure(exc) from exc
        finally:
            # After an error (the block's or a statement's) the transaction is still open.
            if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                with suppress(psycopg.Error):  # the pool drops what it cannot reset
                    conn.execute("ROLLBACK")
            self._pool.putconn(conn)

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read-only transaction that sees one moment of the database."""
        with self.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as conn:
            yield conn

    def run(self, query: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """The rows of one statement, a transaction of its own (rows affected when it returns
        none). The hot paths are single statements: one round trip each."""
        joined: Connection | None = getattr(self._local, "conn", None)
        if joined is not None:
            try:
                cursor = joined.execute(query, args)
                return cursor.fetchall() if cursor.description is not None else [cursor.rowcount]
            except psycopg.Error as exc:
                raise failure(exc) from exc
        conn = self.take()
        try:
            cursor = conn.execute(query, args)
            return cursor.fetchall() if cursor.description is not None else [cursor.rowcount]
        except psycopg.Error as exc:
            raise failure(exc) from exc
        finally:
            self._pool.putconn(conn)

    def run_with(self, setting: str, query: str, args: dict[str, Any]) -> list[Any]:
        """The rows of one statement run after a SET LOCAL statement, in a transaction of its
        own: BEGIN, the setting, the statement and COMMIT go in one pipeline, one round trip."""
        joined: Connection | None = getattr(self._local, "conn", None)
        if joined is not None:
            try:
                joined.execute(setting)
                return joined.execute(query, args).fetchall()
            except psycopg.Error as exc:
                raise failure(exc) from exc
        conn = self.take()
        try:
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute(setting)
                cursor = conn.execute(query, args)
                conn.execute("COMMIT")
            return cursor.fetchall()
        except psycopg.Error as exc:
            if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                with suppress(psycopg.Error):  # the pool drops what it cannot reset
                    conn.execute("ROLLBACK")
            raise failure(exc) from exc
        finally:
            self._pool.putconn(conn)

    def close(self) -> None:
        """Close every connection."""
        self._pool.close()
