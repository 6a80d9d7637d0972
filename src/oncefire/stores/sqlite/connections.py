"""SQLite connections for a store: one per thread (one shared for :memory:), WAL mode,
write transactions that take the lock with BEGIN IMMEDIATE, and driver errors turned into
oncefire's, once, at this boundary."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from types import TracebackType
from typing import Any

from oncefire.errors import StoreError, StoreUnavailableError
from oncefire.stores import faults, queries
from oncefire.stores.connection import NO_ARGS, Args, Row, expand_lists
from oncefire.stores.sqlite.files import explained, file_identity
from oncefire.stores.sqlite.filewatch import WakeFile

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
        self._local = _Local()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        # Each connection with the thread it serves (None: shared), so a dead thread's is closed.
        self._all: list[tuple[threading.Thread | None, sqlite3.Connection]] = []
        self._all_lock = threading.Lock()
        self.wait_limit: float | None = None
        """The most seconds a writer waits for the lock (None: BUSY_TIMEOUT_MS alone)."""
        self.wake = None if is_memory else WakeFile(path)
        """Written when a write commits while a worker sleeps (filewatch.py)."""

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
                raise self._read_only(exc) from exc
            failed = self._explained(exc)
            message = f"Cannot open the SQLite store at {self.path!r}: {exc}."
            raise (failed or StoreError(message)) from exc
        with self._all_lock:
            kept = []
            for thread, other in self._all:
                if thread is None or thread.is_alive():
                    kept.append((thread, other))
                else:
                    other.close()  # its thread ended (a drain's pool): do not leak its files
            self._all = [*kept, (owner, conn)]
        return conn

    def connection(self, *, flushed: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        """This thread's connection; every driver error in the block becomes a StoreError.

        flushed=False: this thread's second connection, whose commits do not wait for the
        disk (synchronous NORMAL), for a write whose loss in a power cut changes no outcome
        (docs/idempotency.md); the first one while this thread is in a transaction on it (the
        write joins it, and a second connection would wait for its lock), or when every
        commit of the store skips the wait already.
        """
        return _Using(self, flushed)

    def _failed(self, using: _Using, exc: BaseException) -> BaseException | None:
        """What an error in a connection() block becomes (None: itself): a driver error a
        StoreError, once, here, for every statement of the store; one that says the files
        are read-only also drops the connection, which stays read-only once opened so
        (closed by the outermost block), and the next use opens another."""
        if using.slot is not None and isinstance(exc, (sqlite3.Error, StoreError)):
            cause = exc if isinstance(exc, sqlite3.Error) else exc.__cause__
            if is_read_only(cause):
                setattr(self._local, using.slot, None)
                if using.depth == 0:
                    self._drop(using.conn)
                if isinstance(exc, StoreError) and "is read-only" in str(exc):
                    return None
                return self._read_only(cause)
        cause = exc.__cause__ if isinstance(exc, StoreError) else exc
        if isinstance(cause, sqlite3.Error) and (better := self._explained(cause)) is not None:
            return None if str(better) == str(exc) else better  # said once, not again
        if isinstance(exc, sqlite3.OperationalError):  # busy, full, read-only, I/O
            return StoreUnavailableError(f"The SQLite store failed: {exc}.")
        if isinstance(exc, sqlite3.Error):
            return StoreError(f"The SQLite store failed: {exc}.")
        return None

    def _explained(self, exc: sqlite3.Error) -> StoreError | None:
        """The error exc becomes when the files tell its cause (sqlite_files.py)."""
        return None if self.is_memory else explained(self.path, exc)

    def _read_only(self, exc: BaseException | None) -> StoreError:
        failed = self._explained(exc) if isinstance(exc, sqlite3.Error) else None
        return failed or StoreUnavailableError(
            f"The store at {self.path} is read-only ({exc}): give this process write "
            "access to the file and its folder; it is opened again on the next use."
        )

    def _drop(self, conn: sqlite3.Connection) -> None:
        """Close a connection of this thread; the next use opens another."""
        with self._all_lock:
            self._all = [(t, c) for t, c in self._all if c is not conn]
        with suppress(sqlite3.Error):
            conn.close()

    def _may_skip_flush(self) -> bool:
        main: sqlite3.Connection | None = self._local.conn
        is_busy_here = self.in_batch or (main is not None and main.in_transaction)
        return self.synchronous == "FULL" and not is_busy_here

    @property
    def in_batch(self) -> bool:
        """Whether this thread is inside batch()."""
        return self._local.batch

    def transaction(self, mode: str = "IMMEDIATE") -> AbstractContextManager[sqlite3.Connection]:
        """A transaction (BEGIN IMMEDIATE: a write; DEFERRED: a read), or this thread's batch."""
        if self.in_batch:
            return self.connection()  # joins the batch's transaction
        return _Transaction(self, mode)

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
        if self.wake is not None:
            self.wake.close()
        self._local = _Local()
        self._shared = None


class _Local(threading.local):
    """A thread's connections and whether it is inside batch(), with class defaults (an
    attribute a thread never set is read without an AttributeError behind getattr)."""

    conn: sqlite3.Connection | None = None
    unflushed: sqlite3.Connection | None = None
    batch = False
    depth = 0  # connection() blocks open, nested


class _Using:
    """A connection() block (a class, not a generator: one is entered for every statement
    and transaction, and a generator's context manager does more work on each entry)."""

    __slots__ = ("_connections", "_flushed", "_locked", "conn", "depth", "slot")

    def __init__(self, connections: SqliteConnections, flushed: bool) -> None:
        self._connections = connections
        self._flushed = flushed
        self._locked = False
        self.slot: str | None = None  # None: the shared connection of an in-memory store
        self.depth = 0

    def __enter__(self) -> sqlite3.Connection:
        c = self._connections
        try:
            if c.is_memory:
                c._shared_lock.acquire()
                self._locked = True
                if c._shared is None:
                    c._shared = c._connect(None)
                self.conn = c._shared
                return self.conn
            slot = "conn" if self._flushed or not c._may_skip_flush() else "unflushed"
            conn: sqlite3.Connection | None = getattr(c._local, slot)
            if conn is None:
                conn = c._connect(threading.current_thread(), flushed=slot == "conn")
                setattr(c._local, slot, conn)
        except BaseException as exc:
            self._release()
            failed = c._failed(self, exc)
            if failed is None:
                raise
            raise failed from exc
        self.conn, self.slot = conn, slot
        self.depth = c._local.depth  # connection() blocks may nest
        c._local.depth = self.depth + 1
        return conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.slot is not None:
            self._connections._local.depth = self.depth
        self._release()
        if exc is not None:
            failed = self._connections._failed(self, exc)
            if failed is not None:
                raise failed from exc

    def _release(self) -> None:
        if self._locked:
            self._locked = False
            self._connections._shared_lock.release()


class _Transaction:
    """A transaction() block outside a batch, on this thread's connection (a class for the
    reason _Using is one)."""

    __slots__ = ("_changes", "_mode", "_using", "conn")

    def __init__(self, connections: SqliteConnections, mode: str) -> None:
        self._using = _Using(connections, True)
        self._mode = mode

    def __enter__(self) -> sqlite3.Connection:
        self.conn = conn = self._using.__enter__()
        try:
            faults.before("begin")
            begin(conn, self._mode, self._using._connections.busy_wait)
            self._changes = conn.total_changes
            faults.after("begin")
        except BaseException as exc:
            try:
                self._roll_back()
            finally:
                self._using.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc is None:
                self._commit()
            else:
                self._roll_back()
        except BaseException as failed:
            self._using.__exit__(type(failed), failed, failed.__traceback__)
            raise
        self._using.__exit__(kind, exc, tb)  # the block's error, changed or (returning) kept

    def _commit(self) -> None:
        try:
            faults.before("commit")
        except BaseException:
            self._roll_back()
            raise
        try:
            self.conn.execute(SQL["commit"])
        except sqlite3.Error as exc:
            self._roll_back()
            failed = (
                StoreUnavailableError if isinstance(exc, sqlite3.OperationalError) else StoreError
            )
            raise failed(f"Commit to the SQLite store failed: {exc}.") from exc
        wake = self._using._connections.wake
        if wake is not None and self.conn.total_changes != self._changes:
            wake.committed()  # a transaction that changed no row wakes no one
        faults.after("commit")  # committed, yet the caller is told it failed

    def _roll_back(self) -> None:
        # SQLite may have rolled back already (SQLITE_FULL, IOERR): a second error from
        # ROLLBACK would hide the first.
        if self.conn.in_transaction:
            self.conn.execute(SQL["rollback"])


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
