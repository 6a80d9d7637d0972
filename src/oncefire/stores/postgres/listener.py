"""Wake idle workers when work arrives: LISTEN on one connection of its own, polling behind it.

Writes notify only while some worker sleeps (oncefire_wake, migration 026): a NOTIFY makes
PostgreSQL's commits take turns. A worker's first wait after work registers it as sleeping, on
its LISTEN connection, and returns at once, so that the worker looks for work once more: what
was written before the registration is visible by then, and later writes notify. After
STAY_REGISTERED seconds of work without a wait, it is forgotten again (working()).
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg

from oncefire.stores import queries
from oncefire.stores.postgres.hosts import CONNECT_TIMEOUT, connect_options
from oncefire.stores.postgres.statements import Connection

RELISTEN_EVERY = 1.0  # seconds before trying again after a listening connection failed to open
STAY_REGISTERED = 1.0  # seconds of work without a wait before a worker no longer sleeps
# A registration tries its lock this many times, REGISTER_PAUSE seconds apart (within the
# wait's timeout), while writes that looked for sleepers hold it; then the worker polls, and
# tries again at its next wait.
REGISTER_TRIES = 50
REGISTER_PAUSE = 0.002

log = logging.getLogger(__name__)


class Listener:
    """A LISTENing connection that reopens itself after it drops, and never raises. Its loss
    and its return are logged once each (a WARNING, then an INFO), however long it stays away."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._is_lost = False  # the connection dropped or could not be opened since it worked
        self._is_sleeper = False  # registered in oncefire_sleepers on the open connection
        self._last_wait = 0.0

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection, if one is open."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout; return early on a notification, or when one may have been
        missed (the connection was just opened or just dropped)."""
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=max(timeout, 0.0)):
            return  # another thread is listening; its wake-up is as good as ours
        try:
            conn, is_new = self._connection()
            self._last_wait = time.monotonic()
            if conn is not None and not self._is_sleeper:
                self._is_sleeper = self._register(conn, deadline)
                # Writes that did not find it asleep are visible now: look for work once more.
                is_new = is_new or self._is_sleeper
            if is_new:
                return  # notifications sent while nobody listened are lost: look for work now
            if conn is not None:
                try:
                    left = max(deadline - time.monotonic(), 0.0)
                    for _ in conn.notifies(timeout=left, stop_after=1):
                        pass
                    for _ in conn.notifies(timeout=0.0):  # those already queued count as one
                        pass
                    return
                except psycopg.Error as exc:
                    self._drop()
                    self._lost(exc)
                    return  # the server may already be back: let the caller look
        finally:
            self._lock.release()
        left = deadline - time.monotonic()
        if left > 0:
            time.sleep(left)  # no listening connection: a plain poll

    def _register(self, conn: Connection, deadline: float) -> bool:
        """Register as sleeping, trying until the wait's deadline at most (once at least);
        False if writes held its lock all the while, or the connection failed: the caller
        then polls, and registers at its next wait."""
        sql = queries.load("postgres")["register_sleeper"]
        try:
            for _ in range(REGISTER_TRIES):
                if conn.execute(sql).fetchone() is not None:
                    return True
                if time.monotonic() + REGISTER_PAUSE >= deadline:
                    break
                time.sleep(REGISTER_PAUSE)
        except psycopg.Error as exc:
            self._drop()
            self._lost(exc)
        return False

    def working(self) -> None:
        """Forget this worker's sleep once it has worked STAY_REGISTERED seconds without a
        wait: writes need not wake it, and notify no more if no other worker sleeps."""
        if not self._is_sleeper or time.monotonic() - self._last_wait < STAY_REGISTERED:
            return
        if not self._lock.acquire(blocking=False):
            return  # another thread is waiting: this process still sleeps
        try:
            if self._conn is not None and not self._conn.closed:
                self._conn.execute(queries.load("postgres")["forget_sleeper"])
            self._is_sleeper = False
        except psycopg.Error as exc:
            self._drop()
            self._lost(exc)
        finally:
            self._lock.release()

    def _connection(self) -> tuple[Connection | None, bool]:
        """The listening connection and whether it is new; None while the server is away."""
        if self._conn is not None and not self._conn.closed:
            return self._conn, False
        if self._conn is not None:
            self._lost("its connection was closed")
        if time.monotonic() < self._retry_at:
            return None, False  # the last attempt failed a moment ago
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                **connect_options(
                    self.url,
                    connect_timeout=CONNECT_TIMEOUT,
                    application_name="oncefire-listener",
                    # A silently dead peer (a cable, a failover) is noticed within about 25 s.
                    keepalives=1,
                    keepalives_idle=10,
                    keepalives_interval=5,
                    keepalives_count=3,
                ),
            )
        except psycopg.Error as exc:
            self._retry_at = time.monotonic() + RELISTEN_EVERY
            self._lost(exc)
            return None, False
        try:
            conn.execute(queries.load("postgres")["listen"])
        except psycopg.Error as exc:
            conn.close()
            self._retry_at = time.monotonic() + RELISTEN_EVERY
            self._lost(exc)
            return None, False
        self._conn = conn
        if self._is_lost:
            self._is_lost = False
            log.info("the LISTEN connection to PostgreSQL is back: new work wakes workers again")
        return conn, True

    def _lost(self, cause: object) -> None:
        """Log the loss of the listening connection, once until it is back."""
        if not self._is_lost:
            self._is_lost = True
            first = str(cause).strip().splitlines()[0] if str(cause).strip() else "no reason given"
            log.warning(
                "the LISTEN connection to PostgreSQL was lost (%s): workers poll for new work "
                "until it is back",
                first,
            )

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._is_sleeper = False  # its row goes with its connection (register_sleeper)

    def close(self) -> None:
        """Close the listening connection (a later wait() opens a new one)."""
        with self._lock:
            self._drop()
