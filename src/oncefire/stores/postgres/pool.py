"""PostgreSQL connections for a store: a psycopg pool that outlives server restarts,
transactions on it, and driver errors turned into oncefire's, once, at this boundary."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

from oncefire.errors import (
    InvalidDocumentError,
    OncefireError,
    StoreConflictError,
    StoreError,
    StoreUnavailableError,
)
from oncefire.model import codec
from oncefire.stores import faults, queries
from oncefire.stores.connection import NO_ARGS, Args, Row
from oncefire.stores.postgres.hosts import (
    CONNECT_TIMEOUT,
    connect_options,
    is_read_only,
    is_standby,
)
from oncefire.stores.postgres.statements import Connection

POOL_MIN = 1
POOL_MAX = 10  # a worker's attempt threads (8 by default) + its loop + one spare
# Seconds a call waits for a connection to a server that takes writes (every one busy, the
# server away, or only a standby reached), and a lost connection is retried, before the call
# fails with StoreUnavailableError: Settings.store_retry_window.
RETRY_WINDOW = 10.0
STANDBY_PAUSE = 0.2  # seconds between connections that reached a standby, within the window
SQL = queries.load("postgres")
# The settings a batch's BEGIN makes (begin_turn), which its statements need not make again.
TURN_SETTINGS = frozenset({SQL["no_bitmap_scans"]})
# Seconds a connection keeps the plans it made before a transaction's BEGIN releases them
# (discard_plans): a plan fits the tables as they were when it was made (a turn keeps its
# generic plans), and only new statistics (ANALYZE) replace it otherwise.
PLANS_FOR = 10.0


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
        return StoreConflictError(
            "Two transactions waited on each other (a deadlock), and PostgreSQL ended this one: "
            "run it again, and write the same documents in the same order everywhere."
        )
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return StoreUnavailableError(
            f"The PostgreSQL store is read-only ({text}): writes resume once the server "
            "accepts them again (a standby promoted, default_transaction_read_only off)."
        )
    if isinstance(exc, psycopg.errors.DiskFull):
        return StoreUnavailableError(
            f"The PostgreSQL server is out of disk space ({text}): writes resume once space "
            "is freed."
        )
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnavailableError(f"The PostgreSQL store is unavailable: {text}.")
    return StoreError(f"The PostgreSQL store failed: {text}.")


def _configure(conn: Connection) -> None:
    # JSONB comes back through oncefire's codec, so datetimes round-trip as on SQLite; a
    # value it cannot decode comes back as an Undecodable, so one bad row fails its own
    # delivery (or read), never the statement that fetched it with others.
    set_json_loads(codec.loads_or_undecodable, conn)


class Pool:
    """Pooled connections to one server, each call on a connection known to be open."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = POOL_MIN,
        max_size: int = POOL_MAX,
        retry_window: float = RETRY_WINDOW,
        is_writer: bool = True,
    ) -> None:
        # Writers drop a connection to a standby (reached through a URL without
        # target_session_attrs, or before a promotion) and look for one that takes writes;
        # a read replica's pool (Settings.read_store) prefers a standby.
        self.retry_window = retry_window
        self._is_writer = is_writer
        replica = {} if is_writer else {"target_session_attrs": "prefer-standby"}
        name = "oncefire" if is_writer else "oncefire-reads"
        options = connect_options(
            url, connect_timeout=CONNECT_TIMEOUT, application_name=name, **replica
        )
        # One direct connection first, so a wrong URL or password fails at once, clearly.
        try:
            psycopg.connect(url, **options).close()
        except psycopg.Error as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            raise StoreUnavailableError(f"Cannot connect to the PostgreSQL store: {text}.") from exc
        self._local = threading.local()  # the connection of a batch() in progress, per thread
        self._planned_at: weakref.WeakKeyDictionary[Connection, float] = (
            weakref.WeakKeyDictionary()
        )  # when each connection's plans were released last (or it was first used)
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, **options},
            configure=_configure,
            timeout=retry_window,
            reconnect_timeout=retry_window,
            num_workers=2,
            name="oncefire",
            open=False,
        )
        self._pool.open(wait=False)

    def take(self) -> Connection:
        """A pooled connection that is still open, to a server that takes writes (unless this
        is a read-only store's pool). One the server closed while it sat idle in the pool (a
        restart) is dropped, and another taken, without a round trip; one to a standby too,
        until the retry window ends."""
        deadline = time.monotonic() + self.retry_window
        last: psycopg.Error | None = None
        closed = 0
        while True:
            try:
                conn = self._pool.getconn(max(deadline - time.monotonic(), 0.01))
            except psycopg.Error as exc:
                if isinstance(last, psycopg.errors.ReadOnlySqlTransaction):
                    raise failure(last) from exc
                raise StoreUnavailableError(
                    f"No PostgreSQL connection came free within {self.retry_window:g} s: is "
                    f"the server up? ({exc})"
                ) from exc
            try:
                # The server's goodbye, then end-of-file: the second read sees the close.
                conn.pgconn.consume_input()
                conn.pgconn.consume_input()
            except psycopg.Error as exc:
                self._pool.putconn(conn)  # the pool replaces a closed connection
                last, closed = exc, closed + 1
                if closed > self._pool.max_size:
                    raise failure(exc) from exc
                continue
            if not (self._is_writer and is_standby(conn)):
                return conn
            conn.close()  # the pool replaces it: libpq may reach the primary next time
            self._pool.putconn(conn)
            last = psycopg.errors.ReadOnlySqlTransaction("the server reached is a standby")
            left = deadline - time.monotonic()
            if left <= 0:
                raise failure(last)
            time.sleep(min(STANDBY_PAUSE, left))

    @property
    def in_batch(self) -> bool:
        """Whether this thread is inside batch()."""
        return getattr(self._local, "conn", None) is not None

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make this thread's calls share one transaction until the block ends."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self.transaction("begin_turn") as conn:
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    def give_back(self, conn: Connection) -> None:
        """Return a connection taken with take(). A writer's connection to a server that
        turned out read-only (a write met SQLSTATE 25006, or the server said so) is closed,
        so that the next one is made afresh and libpq looks for the primary again."""
        if self._is_writer and not conn.closed and is_read_only(conn):
            conn.close()
        self._pool.putconn(conn)

    @contextmanager
    def transaction(
        self, begin: str = "begin", *, is_pipelined: bool = False
    ) -> Iterator[Connection]:
        """A transaction on a pooled connection: commits on exit, rolls back on an exception.
        Inside batch() it joins the batch's transaction. Pipelined, statements go to the
        server when a result is fetched or at the COMMIT, not one round trip each. begin
        names the query that opens it."""
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
        conn = self._begin(begin)
        try:
            try:
                faults.after(begin)
                yield conn
                faults.before("commit")
            except BaseException:
                if not conn.broken:
                    with suppress(psycopg.Error):  # the pool drops what it cannot reset
                        conn.execute(SQL["rollback"])
                raise
            conn.execute(SQL["commit"])
            faults.after("commit")  # committed, yet the caller is told it failed
        except psycopg.Error as exc:
            raise failure(exc) from exc
        finally:
            self.give_back(conn)

    def _begin(self, begin: str) -> Connection:
        """A pooled connection in a transaction opened by the query begin. One the server
        closed so recently that take() could not tell (a restart) fails at its BEGIN, before
        anything was done: it is dropped and another one begins."""
        for tries_left in range(self._pool.max_size, -1, -1):
            conn = self.take()
            try:
                faults.before(begin)
                conn.execute(self._opening(conn, begin))
            except psycopg.Error as exc:
                self.give_back(conn)
                if conn.broken and tries_left:
                    continue
                raise failure(exc) from exc
            except BaseException:
                self.give_back(conn)
                raise
            return conn
        raise AssertionError("unreachable: the last try returns or raises")

    def _opening(self, conn: Connection, begin: str) -> str:
        """The query begin, which also releases the connection's cached plans once they are
        PLANS_FOR old, in the same message (not in a pipeline, which sends one statement a
        message; its document writes look rows up by key alone). A worker's statements
        prepared on a new store were planned for tables of a few pages: ending a turn's
        attempts would scan the whole deliveries table once it grew (a hash join over a
        sequential scan) until an ANALYZE, which autovacuum makes within a minute or so, and
        never with it off (docs/performance.md)."""
        now = time.monotonic()
        planned_at = self._planned_at.setdefault(conn, now)
        if now - planned_at < PLANS_FOR:
            return SQL[begin]
        self._planned_at[conn] = now
        return f"{SQL[begin]}; {SQL['discard_plans']}"

    @contextmanager
    def _pipelined(self, begin: str) -> Iterator[Connection]:
        conn = self.take()
        try:
            with conn.pipeline():
                faults.before(begin)
                conn.execute(SQL[begin])
                yield conn
                faults.before("commit")
                conn.execute(SQL["commit"])
            # Leaving the pipeline syncs: an error of any queued statement is raised here.
            faults.after("commit")  # committed, yet the caller is told it failed
        except psycopg.Error as exc:
            raise failure(exc) from exc
        finally:
            # After an error (the block's or a statement's) the transaction is still open.
            if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                with suppress(psycopg.Error):  # the pool drops what it cannot reset
                    conn.execute(SQL["rollback"])
            self.give_back(conn)

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read-only transaction that sees one moment of the database."""
        with self.transaction("begin_snapshot") as conn:
            yield conn

    def run(self, query: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """The rows of one statement, a transaction of its own (rows affected when it returns
        none). The hot paths are single statements: one round trip each."""
        joined: Connection | None = getattr(self._local, "conn", None)
        if joined is not None:
            try:
                faults.before(query)
                cursor = joined.execute(query, args)
                rows = cursor.fetchall() if cursor.description is not None else [cursor.rowcount]
                faults.after(query)
                return rows
            except psycopg.Error as exc:
                raise failure(exc) from exc
        conn = self.take()
        try:
            faults.before(query)
            cursor = conn.execute(query, args)
            rows = cursor.fetchall() if cursor.description is not None else [cursor.rowcount]
            faults.after(query)  # committed (autocommit), yet the caller is told it failed
            return rows
        except psycopg.Error as exc:
            raise failure(exc) from exc
        finally:
            self.give_back(conn)

    def run_with(self, setting: str, query: str, args: dict[str, Any]) -> list[Any]:
        """The rows of one statement run after a SET LOCAL statement, in a transaction of its
        own: BEGIN, the setting, the statement and COMMIT go in one pipeline, one round trip.
        Inside batch() it joins the batch, after the setting unless the batch's BEGIN made
        it (begin_turn: TURN_SETTINGS)."""
        if getattr(self._local, "conn", None) is not None:
            if setting not in TURN_SETTINGS:
                self.run(setting)
            return self.run(query, args)
        conn = self.take()
        try:
            faults.before(query)
            with conn.pipeline():
                conn.execute(SQL["begin"])
                conn.execute(setting)
                cursor = conn.execute(query, args)
                conn.execute(SQL["commit"])
            rows = cursor.fetchall()
            faults.after(query)  # committed, yet the caller is told it failed
            return rows
        except psycopg.Error as exc:
            if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                with suppress(psycopg.Error):  # the pool drops what it cannot reset
                    conn.execute(SQL["rollback"])
            raise failure(exc) from exc
        finally:
            self.give_back(conn)

    def close(self) -> None:
        """Close every connection."""
        self._pool.close()


class PooledStatements:
    """Named queries each run on a pooled connection as a transaction of its own (or in this
    thread's batch): one round trip each."""

    def __init__(self, pool: Pool, *, flushed: bool = True) -> None:
        self._pool = pool
        # False: a query that reads %(unflushed)s commits without waiting for the WAL flush
        # (synchronous_commit off for its own transaction), but never inside a batch.
        self._flushed = flushed

    def _args(self, args: Args) -> dict[str, Any]:
        if self._flushed:
            return dict(args)
        return {**args, "unflushed": not self._pool.in_batch}

    def fetch(self, name: str, args: Args = NO_ARGS) -> list[Row]:
        """The rows a query returns."""
        return self._pool.run(SQL[name], self._args(args))

    def execute(self, name: str, args: Args = NO_ARGS) -> None:
        """Run a statement."""
        self._pool.run(SQL[name], self._args(args))

    def count(self, name: str, args: Args = NO_ARGS) -> int:
        """Run a statement; the number of rows it changed."""
        return int(self._pool.run(SQL[name], self._args(args))[0])

    def execute_many(self, name: str, rows: Sequence[Args]) -> None:
        """Run a statement once per set of arguments, in one transaction."""
        with self._pool.transaction() as conn:
            faults.before(name)
            conn.cursor().executemany(SQL[name], rows)
            faults.after(name)
