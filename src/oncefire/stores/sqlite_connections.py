"""SQLite connections for a store: one per thread (one shared for :memory:), WAL mode,
write transactions that take the lock with BEGIN IMMEDIATE, and driver errors turned into
oncefire's, once, at this boundary."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from oncefire.errors import StoreError, StoreUnavailableError
from oncefire.stores import faults, queries
from oncefire.stores.connection import NO_ARGS, Args, Row, expand_lists

# The longest a writer waits for the lock. An app's store waits less when its settings need
# it (SqliteConnections.wait_limit): a worker waiting for the lock must still renew in time.
BUSY_TIMEOUT_MS = 15_000
SQL = queries.load("sqlite")


class SqliteConnections:
    """The connections of one SQLite store and the transactions on them."""

    def __init__(self, path: str, *, is_memory: bool, synchronous: str) -> None:
        self.path = path
        self.is_memory = is_memory
        self.synchronous = synchronous
        self._local = threading.local()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        # Each connection with the thread it serves (None: shared), so a dead thread's is closed.
        self._all: list[tuple[threading.Thread | None, sqlite3.Connection]] = []
        self._all_lock = threading.Lock()
        self.wait_limit: float | None = None
        """The most seconds a writer waits for the lock (None: BUSY_TIMEOUT_MS alone)."""

    @property
    def busy_wait(self) -> float:
        """How long a writer waits for the lock, in seconds."""
        longest = BUSY_TIMEOUT_MS / 1000
        return longest if self.wait_limit is None else min(longest, self.wait_limit)

    def _connect(
        self, owner: threading.Thread | None, *, flushed: bool = True
    ) -> sqlite3.Connection:
        # auto_vacuum takes effect only before the first table: set it on a new file only, so
        # opening an existing store writes nothing (a read-only one opens, and says so later).
        is_new = (
            self.is_memory or file_identity(self.path) is None or not os.path.getsize(self.path)
        )
        try:
            conn = sqlite3.connect(
                ":memory:" if self.is_memory else self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_wait,
            )
            if is_new:
                conn.execute(SQL["incremental_auto_vacuum"])
            if not self.is_memory:
                conn.execute(SQL["wal_mode"])
            is_full = self.synchronous == "FULL" and flushed
            conn.execute(SQL["synchronous_full" if is_full else "synchronous_normal"])
            conn.execute(SQL["short_busy_timeout"])
        except sqlite3.Error as exc:
            if is_read_only(exc):  # a store made read-only serves again once it is writable
                raise StoreUnavailableError(
                    f"The store at {self.path} is read-only ({exc}): give this process write "
                    "access to the file and its folder; it is opened again on the next use."
                ) from exc
            raise StoreError(f"Cannot open the SQLite store at {self.path!r}: {exc}.") from exc
        with self._all_lock:
            kept = []
            for thread, other in self._all:
                if thread is None or thread.is_alive():
                    kept.append((thread, other))
                else:
                    other.close()  # its thread ended (a drain's pool): do not leak its files
            self._all = [*kept, (owner, conn)]
        return conn

    @contextmanager
    def connection(self, *, flushed: bool = True) -> Iterator[sqlite3.Connection]:
        """This thread's connection; every driver error in the block becomes a StoreError.

        flushed=False: this thread's second connection, whose commits do not wait for the
        disk (synchronous NORMAL), for a write whose loss in a power cut changes no outcome
        (docs/idempotency.md); the first one while this thread is in a transaction on it (the
        write joins it, and a second connection would wait for its lock), or when every
        commit of the store skips the wait already.
        """
        try:
            if self.is_memory:
                with self._shared_lock:
                    if self._shared is None:
                        self._shared = self._connect(None)
                    yield self._shared
                return
            slot = "conn" if flushed or not self._may_skip_flush() else "unflushed"
            conn = getattr(self._local, slot, None)
            if conn is None:
                conn = self._connect(threading.current_thread(), flushed=slot == "conn")
                setattr(self._local, slot, conn)
            depth = getattr(self._local, "depth", 0)  # connection() blocks may nest
            self._local.depth = depth + 1
            try:
                yield conn
            except (sqlite3.Error, StoreError) as exc:
                cause = exc if isinstance(exc, sqlite3.Error) else exc.__cause__
                if not is_read_only(cause):
                    raise
                # A connection opened while the files were read-only stays read-only: drop
                # it (closed by the outermost block), and open another on the next use.
                setattr(self._local, slot, None)
                if depth == 0:
                    self._drop(conn)
                if isinstance(exc, StoreError) and "is read-only" in str(exc):
                    raise
                raise StoreUnavailableError(
                    f"The store at {self.path} is read-only ({cause}): give this process write "
                    "access to the file and its folder; it is opened again on the next use."
                ) from exc
            finally:
                self._local.depth = depth
        except sqlite3.OperationalError as exc:  # busy, full, read-only, I/O: not the data's fault
            raise StoreUnavailableError(f"The SQLite store failed: {exc}.") from exc
        except sqlite3.Error as exc:  # wrapped once, here, for every statement of the store
            raise StoreError(f"The SQLite store failed: {exc}.") from exc

    def _drop(self, conn: sqlite3.Connection) -> None:
        """Close a connection of this thread; the next use opens another."""
        with self._all_lock:
            self._all = [(t, c) for t, c in self._all if c is not conn]
        with suppress(sqlite3.Error):
            conn.close()

    def _may_skip_flush(self) -> bool:
        main: sqlite3.Connection | None = getattr(self._local, "conn", None)
        is_busy_here = self.in_batch or (main is not None and main.in_transaction)
        return self.synchronous == "FULL" and not is_busy_here

    @property
    def in_batch(self) -> bool:
        """Whether this thread is inside batch()."""
        return bool(getattr(self._local, "batch", False))

    @contextmanager
    def transaction(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        """A transaction (BEGIN IMMEDIATE: a write; DEFERRED: a read), or this thread's batch."""
        if self.in_batch:
            with self.connection() as conn:  # joins the batch's transaction
                yield conn
            return
        with self.connection() as conn:
            faults.before("begin")
            begin(conn, mode, self.busy_wait)
            try:
                faults.after("begin")
                yield conn
                faults.before("commit")
            except BaseException:
                # SQLite may have rolled back already (SQLITE_FULL, IOERR): a second error
                # from ROLLBACK would hide the first.
                if conn.in_transaction:
                    conn.execute(SQL["rollback"])
                raise
            try:
                conn.execute(SQL["commit"])
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute(SQL["rollback"])
                failed = (
                    StoreUnavailableError
                    if isinstance(exc, sqlite3.OperationalError)
                    else StoreError
                )
                raise failed(f"Commit to the SQLite store failed: {exc}.") from exc
            faults.after("commit")  # committed, yet the caller is told it failed

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make this thread's store calls share one write transaction until the block ends."""
        if self.in_batch:
            yield
            return
        with self.transaction():
            self._local.batch = True
            try:
                yield
            finally:
                self._local.batch = False

    def close(self) -> None:
        """Close every connection."""
        with self._all_lock:
            for _, conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
        self._shared = None


def is_read_only(exc: BaseException | None) -> bool:
    """Whether an error means the store's files cannot be written (SQLITE_READONLY)."""
    return isinstance(exc, sqlite3.Error) and "readonly database" in str(exc)


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether an error means another connection holds the lock."""
    return "locked" in str(exc) or "busy" in str(exc)


def begin(conn: sqlite3.Connection, mode: str, wait: float) -> None:
    """BEGIN a transaction, waiting up to `wait` seconds for the lock.

    SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between tries, so a worker next
    to a busy writer would wait in ever longer naps while the writer keeps taking the lock.
    Asking again every fraction of a millisecond shares the lock fairly.
    """
    deadline = time.monotonic() + wait
    nap = 0.0001
    while True:
        try:
            conn.execute(SQL["begin_immediate" if mode == "IMMEDIATE" else "begin_deferred"])
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise StoreUnavailableError(f"The SQLite store is unavailable: {exc}.") from exc
            if time.monotonic() >= deadline:
                raise StoreUnavailableError(
                    f"The SQLite store stayed locked for {wait:g} s: {exc}."
                ) from exc
            time.sleep(nap)
            nap = min(nap * 2, 0.002)
        except sqlite3.Error as exc:
            raise StoreError(f"The SQLite store is unavailable: {exc}.") from exc


class OneStatement:
    """Statements each committed on its own (or in the thread's batch). One that meets a busy
    writer waits busy_timeout inside SQLite, fails changing nothing, and is run again until
    the store's busy wait has passed."""

    def __init__(self, connections: SqliteConnections, *, flushed: bool = True) -> None:
        self._connections = connections
        self._flushed = flushed  # False: committed without waiting for the disk (connection())

    def _run(self, name: str, args: Args, answer: Callable[[sqlite3.Cursor], Any]) -> Any:
        deadline = time.monotonic() + self._connections.busy_wait
        sql, flat = expand_lists(SQL[name], args)
        with self._connections.connection(flushed=self._flushed) as conn:
            faults.before(name)
            while True:
                try:
                    result = answer(conn.execute(sql, flat))
                    faults.after(name)
                    return result
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc) or time.monotonic() >= deadline:
                        raise

    def fetch(self, name: str, args: Args = NO_ARGS) -> list[Row]:
        """The rows a query returns."""
        return list(self._run(name, args, lambda c: c.fetchall()))

    def execute(self, name: str, args: Args = NO_ARGS) -> None:
        """Run a statement."""
        self._run(name, args, lambda c: None)

    def count(self, name: str, args: Args = NO_ARGS) -> int:
        """Run a statement; the number of rows it changed."""
        return int(self._run(name, args, lambda c: c.rowcount))

    def execute_many(self, name: str, rows: Sequence[Args]) -> None:
        """Run a statement once per set of arguments, each on its own."""
        for args in rows:
            self.execute(name, args)


def file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of a file, None if there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino
