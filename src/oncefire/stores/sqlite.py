"""The embedded store: one SQLite file in WAL mode, BEGIN IMMEDIATE for every write."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple
from typing import Any

from oncefire import codec
from oncefire.errors import ConfigError, SchemaVersionError, StoreError
from oncefire.events import StoredEvent
from oncefire.stores import migrations
from oncefire.stores.base import (
    AttemptResult,
    Claimed,
    DeadLetterFilter,
    DeadLetterRow,
    FunctionCounts,
    FunctionRecord,
    IdempotencyRecord,
    Lease,
)
from oncefire.stores.catalog import BUMP_SQL, CatalogCache
from oncefire.stores.filewatch import FileWatch
from oncefire.stores.sqlite_tx import SqliteTx, marks

BUSY_TIMEOUT_MS = 30_000
# What a delivery whose attempt just ended tells of it, for that attempt's row.
_ENDED = "id, event_id, function, attempt, worker, claimed_at"
_DEAD_COLUMNS = """d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated"""


class SqliteStore:
    """oncefire's state in one SQLite file (or in memory, for scripts)."""

    dialect = "sqlite"

    def __init__(self, url: str, *, synchronous: str = "FULL") -> None:
        self.url = url
        # sqlite:///relative.db, sqlite:////absolute.db, sqlite://:memory:
        self.is_memory = url in ("sqlite://:memory:", "sqlite:///:memory:", "sqlite://")
        self.path = "" if self.is_memory else url.removeprefix("sqlite:///")
        if not self.is_memory and (not url.startswith("sqlite:///") or not self.path):
            raise ConfigError(
                f"Bad SQLite store URL {url!r}: use sqlite:///relative/path.db, "
                "sqlite:////absolute/path.db or sqlite://:memory:."
            )
        self.synchronous = synchronous.upper()
        self._local = threading.local()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        # Each connection with the thread it serves (None: shared), so a dead thread's is closed.
        self._all: list[tuple[threading.Thread | None, sqlite3.Connection]] = []
        self._all_lock = threading.Lock()
        self._watch: FileWatch | None = None
        self._catalogs = CatalogCache()  # functions and index fields, between transactions
        try:
            self.migrate()
        except BaseException:
            self.close()  # a store that cannot be used keeps no file open
            raise

    # -- connections -------------------------------------------------------------------

    def _connect(self, owner: threading.Thread | None) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                ":memory:" if self.is_memory else self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if not self.is_memory:
                conn.execute("PRAGMA journal_mode = WAL")
            # FULL: an acknowledged commit survives power loss; NORMAL is an explicit opt-in.
            conn.execute(
                f"PRAGMA synchronous = {'FULL' if self.synchronous == 'FULL' else 'NORMAL'}"
            )
            # Write transactions wait in _begin; a short wait here covers the rest (a reader
            # meeting a checkpoint), without SQLite's long naps.
            conn.execute("PRAGMA busy_timeout = 20")
        except sqlite3.Error as exc:
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
    def _conn(self) -> Iterator[sqlite3.Connection]:
        try:
            if self.is_memory:
                with self._shared_lock:
                    if self._shared is None:
                        self._shared = self._connect(None)
                    yield self._shared
                return
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self._connect(threading.current_thread())
            yield conn
        except sqlite3.Error as exc:  # wrapped once, here, for every statement of the store
            raise StoreError(f"The SQLite store failed: {exc}.") from exc

    @contextmanager
    def _tx(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        if getattr(self._local, "batch", False):
            with self._conn() as conn:  # joins the batch's transaction
                yield conn
            return
        with self._conn() as conn:
            self._begin(conn, mode)
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"Commit to the SQLite store failed: {exc}.") from exc

    @staticmethod
    def _begin(conn: sqlite3.Connection, mode: str) -> None:
        # SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between tries, so a worker
        # next to a busy writer would wait in ever longer naps while the writer keeps taking
        # the lock. Asking again every fraction of a millisecond shares the lock fairly.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        nap = 0.0001
        while True:
            try:
                conn.execute(f"BEGIN {mode}")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise StoreError(f"The SQLite store is unavailable: {exc}.") from exc
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"The SQLite store stayed locked for {BUSY_TIMEOUT_MS / 1000:g} s: {exc}."
                    ) from exc
                time.sleep(nap)
                nap = min(nap * 2, 0.002)
            except sqlite3.Error as exc:
                raise StoreError(f"The SQLite store is unavailable: {exc}.") from exc

    @contextmanager
    def batch(self) -> Iterator[None]:
        if getattr(self._local, "batch", False):
            yield
            return
        try:
            with self._tx() as _:
                self._local.batch = True
                try:
                    yield
                finally:
                    self._local.batch = False
        except sqlite3.Error as exc:
            raise StoreError(f"The SQLite store failed: {exc}.") from exc

    @contextmanager
    def transaction(self) -> Iterator[SqliteTx]:
        try:
            with self._tx() as conn:
                yield SqliteTx(conn, self._catalogs)
        except sqlite3.Error as exc:
            raise StoreError(f"The SQLite store failed: {exc}.") from exc

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        try:
            with self._tx("DEFERRED") as conn:
                yield SqliteTx(conn, self._catalogs)
        except sqlite3.Error as exc:
            raise StoreError(f"The SQLite store failed: {exc}.") from exc

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        with self._all_lock:
            for _, conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
        self._shared = None

    # -- schema ------------------------------------------------------------------------

    def migrate(self) -> int:
        steps = migrations.load(self.dialect)
        with self._tx() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS oncefire_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT max(version) FROM oncefire_schema").fetchone()
            current = row[0] or 0
            if current > steps[-1][0]:
                raise SchemaVersionError(
                    f"The store's schema is at {current} but this oncefire knows only "
                    f"{steps[-1][0]}: upgrade oncefire."
                )
            for version, sql in steps:
                if version > current:
                    for statement in migrations.statements(sql):
                        conn.execute(statement)
                    conn.execute("INSERT INTO oncefire_schema (version) VALUES (?)", (version,))
                    current = version
        return int(current)

    # -- catalog -----------------------------------------------------------------------

    def register_functions(self, records: Sequence[FunctionRecord]) -> None:
        with self._tx() as conn:
            conn.executemany(
                "INSERT INTO oncefire_functions (name, kind, source, event_types, registered_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET kind = excluded.kind,"
                " source = excluded.source, event_types = excluded.event_types",
                [
                    (r.name, r.kind, r.source, ",".join(r.event_types), r.registered_at)
                    for r in records
                ],
            )
            conn.execute(BUMP_SQL)  # every store's next transaction reads the catalogue again

    def declare_index(
        self,
        collection: str,
        field: str,
        entries_of: Callable[[Iterator[tuple[str, dict[str, Any]]]], dict[str, str]],
    ) -> None:
        with self._tx() as conn:  # BEGIN IMMEDIATE: no write can come between read and index
            entries = entries_of(SqliteTx(conn).list_documents(collection))
            conn.execute(
                "INSERT INTO oncefire_index_fields (collection, field) VALUES (?, ?)"
                " ON CONFLICT DO NOTHING",
                (collection, field),
            )
            conn.execute(BUMP_SQL)
            conn.execute(
                "DELETE FROM oncefire_index_entries WHERE collection = ? AND field = ?",
                (collection, field),
            )
            conn.executemany(
                "INSERT INTO oncefire_index_entries (collection, field, value, path)"
                " VALUES (?, ?, ?, ?)",
                [(collection, field, value, path) for path, value in entries.items()],
            )

    # -- deliveries --------------------------------------------------------------------

    @staticmethod
    def _event_rows(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        rows = conn.execute(
            "SELECT id, type, source, time, data, size FROM oncefire_events"
            f" WHERE id IN ({marks(ids)})",
            list(ids),
        )
        return {r[0]: r for r in rows}

    @staticmethod
    def _event(row: tuple[Any, ...]) -> StoredEvent:
        # Decoded once the transaction has ended: the write lock is held no longer than needed.
        return StoredEvent(row[0], row[1], row[2], row[3], codec.loads(row[4]), row[5])

    def claim(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
    ) -> list[Claimed]:
        if not functions:
            return []
        token = uuid.uuid4().hex  # one a claim: the lease is the delivery id with it
        with self._tx() as conn:
            room = self._room(conn, caps, now)
            # The uncapped functions, then each capped function up to its room: a capped
            # function's backlog never hides another function's due deliveries.
            uncapped = [f for f in functions if f not in room]
            groups = [(uncapped, limit)] if uncapped else []
            groups += [([f], min(room[f], limit)) for f in functions if room.get(f, 0) > 0]
            candidates: list[tuple[float, int]] = []
            for names, most in groups:
                query = (
                    # The due index walks pending rows in run_at order and stops at LIMIT;
                    # the planner would otherwise pick (function, state) and sort the backlog.
                    "SELECT run_at, id FROM oncefire_deliveries INDEXED BY oncefire_deliveries_due"
                    f" WHERE state = 'pending' AND run_at <= ? AND function IN ({marks(names)})"
                )
                args: list[Any] = [now, *names]
                if delivery_ids is not None:
                    query += f" AND id IN ({marks(delivery_ids)})"
                    args += list(delivery_ids)
                query += " ORDER BY run_at, id LIMIT ?"
                candidates += conn.execute(query, [*args, most]).fetchall()
            chosen = [delivery_id for _, delivery_id in sorted(candidates)[:limit]]
            if not chosen:
                return []
            taken = conn.execute(
                "UPDATE oncefire_deliveries SET state = 'running', attempt = attempt + 1,"
                " lease_token = ?, lease_until = ?, worker = ?, claimed_at = ?"
                f" WHERE id IN ({marks(chosen)}) AND state = 'pending'"
                " RETURNING run_at, id, function, attempt, event_id, replayed_at",
                [token, lease_until, worker, now, *chosen],
            ).fetchall()
            events = self._event_rows(conn, list({t[4] for t in taken}))
        decoded = {event_id: self._event(row) for event_id, row in events.items()}
        return [
            Claimed(Lease(d, token), f, n, now, decoded[e], replayed)
            for _, d, f, n, e, replayed in sorted(taken)
        ]

    @staticmethod
    def _room(conn: sqlite3.Connection, caps: dict[str, int], now: float) -> dict[str, int]:
        if not caps:
            return {}
        names = list(caps)
        rows = conn.execute(
            "SELECT function, count(*) FROM oncefire_deliveries WHERE state = 'running'"
            f" AND lease_until > ? AND function IN ({marks(names)}) GROUP BY function",
            [now, *names],
        ).fetchall()
        running = dict(rows)
        return {name: cap - running.get(name, 0) for name, cap in caps.items()}

    def _finish(
        self,
        conn: sqlite3.Connection,
        lease: Lease,
        result: AttemptResult,
        set_sql: str,
        args: Sequence[Any],
    ) -> bool:
        ended = conn.execute(
            f"UPDATE oncefire_deliveries SET {set_sql}, lease_token = NULL, lease_until = NULL"
            f" WHERE id = ? AND state = 'running' AND lease_token = ? RETURNING {_ENDED}",
            (*args, lease.delivery_id, lease.token),
        ).fetchall()
        self._write_attempts(conn, ended, {lease.delivery_id: result})
        return bool(ended)

    @staticmethod
    def _write_attempts(
        conn: sqlite3.Connection,
        ended: Sequence[Sequence[Any]],
        results: dict[int, AttemptResult],
    ) -> None:
        """The attempt rows of deliveries that just ended (rows of RETURNING _ENDED): an
        attempt is written once, when it ends; until then its delivery tells of it."""
        rows = []
        for delivery_id, event_id, function, number, worker, claimed_at in ended:
            result = results[delivery_id]
            started = next(
                t for t in (result.started_at, claimed_at, result.finished_at) if t is not None
            )
            row = (delivery_id, event_id, function, number, worker, started)
            rows.append((*row, result.finished_at, result.outcome, result.error))
        conn.executemany(
            "INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,"
            " started_at, finished_at, outcome, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def complete(self, lease: Lease, result: AttemptResult) -> bool:
        with self._tx() as conn:
            return self._finish(conn, lease, result, "state = 'succeeded', error = NULL", ())

    def complete_many(self, items: Sequence[tuple[Lease, AttemptResult]]) -> set[int]:
        by_token: dict[str, list[int]] = {}
        for lease, _ in items:
            by_token.setdefault(lease.token, []).append(lease.delivery_id)
        results = {lease.delivery_id: result for lease, result in items}
        ended: list[Any] = []
        with self._tx() as conn:
            # A claim's deliveries share its token: one statement a claim, not one a delivery.
            for token, ids in by_token.items():
                ended += conn.execute(
                    "UPDATE oncefire_deliveries SET state = 'succeeded', error = NULL,"
                    " lease_token = NULL, lease_until = NULL WHERE lease_token = ?"
                    f" AND state = 'running' AND id IN ({marks(ids)}) RETURNING {_ENDED}",
                    [token, *ids],
                ).fetchall()
            self._write_attempts(conn, ended, results)
        return {row[0] for row in ended}

    def retry(self, lease: Lease, result: AttemptResult, run_at: float) -> bool:
        with self._tx() as conn:
            return self._finish(
                conn,
                lease,
                result,
                "state = 'pending', run_at = ?, error = ?",
                (run_at, result.error),
            )

    def bury(
        self, lease: Lease, result: AttemptResult, error: str | None, truncated: str | None
    ) -> bool:
        with self._tx() as conn:
            done = self._finish(
                conn,
                lease,
                result,
                "state = 'dead', error = ?, dead_at = ?, truncated = ?, dead_payload = ?",
                (error, result.finished_at, int(truncated is not None), truncated),
            )
            if done and truncated is not None:
                # The full payload is not kept once no other delivery still needs it.
                conn.execute(
                    "UPDATE oncefire_events SET data = ? WHERE id = (SELECT event_id FROM"
                    " oncefire_deliveries WHERE id = ?) AND NOT EXISTS (SELECT 1 FROM"
                    " oncefire_deliveries o WHERE o.event_id = oncefire_events.id AND o.id != ?"
                    " AND o.state IN ('pending', 'running'))",
                    (truncated, lease.delivery_id, lease.delivery_id),
                )
            return done

    def forward(
        self, lease: Lease, result: AttemptResult, event: StoredEvent, functions: Sequence[str]
    ) -> bool:
        with self._tx() as conn:
            done = self._finish(
                conn, lease, result, "state = 'forwarded', error = ?", (result.error,)
            )
            if done:
                SqliteTx(conn).append(event, functions, event.time)
            return done

    def release(self, leases: Sequence[Lease]) -> int:
        released = 0
        with self._tx() as conn:
            for lease in leases:
                cursor = conn.execute(
                    "UPDATE oncefire_deliveries SET state = 'pending', attempt = attempt - 1,"
                    " lease_token = NULL, lease_until = NULL, worker = NULL"
                    " WHERE id = ? AND state = 'running' AND lease_token = ?",
                    (lease.delivery_id, lease.token),
                )
                released += cursor.rowcount
        return released

    def renew(self, leases: Sequence[Lease], now: float, lease_until: float) -> list[Lease]:
        kept = []
        with self._tx() as conn:
            for lease in leases:
                cursor = conn.execute(
                    "UPDATE oncefire_deliveries SET lease_until = ? WHERE id = ?"
                    " AND state = 'running' AND lease_token = ? AND lease_until > ?",
                    (lease_until, lease.delivery_id, lease.token, now),
                )
                if cursor.rowcount == 1:
                    kept.append(lease)
        return kept

    def expired_leases(self, now: float, functions: Sequence[str], limit: int) -> list[Claimed]:
        if not functions:
            return []
        with self._tx("DEFERRED") as conn:
            rows = conn.execute(
                "SELECT d.id, d.lease_token, d.function, d.attempt, d.event_id, d.claimed_at"
                " FROM oncefire_deliveries d WHERE d.state = 'running'"
                f" AND d.lease_until <= ? AND d.function IN ({marks(functions)}) LIMIT ?",
                [now, *functions, limit],
            ).fetchall()
            events = self._event_rows(conn, list({r[4] for r in rows})) if rows else {}
        return [
            Claimed(
                Lease(r[0], r[1]),
                r[2],
                r[3],
                r[5] if r[5] is not None else now,
                self._event(events[r[4]]),
            )
            for r in rows
        ]

    def wait(self, timeout: float) -> None:
        # Every commit writes the WAL file, so a write to it tells of possible new work.
        if self.is_memory:
            time.sleep(timeout)
            return
        if self._watch is None:
            self._watch = FileWatch(self.path + "-wal")
        self._watch.wait(timeout)

    def next_due(self, functions: Sequence[str]) -> float | None:
        if not functions:
            return None
        with self._conn() as conn:
            row = conn.execute(
                "SELECT min(run_at) FROM oncefire_deliveries WHERE state = 'pending'"
                f" AND function IN ({marks(functions)})",
                list(functions),
            ).fetchone()
        return None if row[0] is None else float(row[0])

    # -- dead letters ------------------------------------------------------------------

    @staticmethod
    def _dead_where(where: DeadLetterFilter, ids: Sequence[int] | None) -> tuple[str, list[Any]]:
        sql, args = "d.state = 'dead'", list[Any]()
        if where.function is not None:
            sql += " AND d.function = ?"
            args.append(where.function)
        if where.error_contains is not None:
            sql += " AND instr(d.error, ?) > 0"
            args.append(where.error_contains)
        if where.since is not None:
            sql += " AND d.dead_at >= ?"
            args.append(where.since)
        if where.until is not None:
            sql += " AND d.dead_at < ?"
            args.append(where.until)
        if ids is not None:
            sql += f" AND d.id IN ({marks(ids)})"
            args += list(ids)
        return sql, args

    @staticmethod
    def _dead_row(r: Sequence[Any]) -> DeadLetterRow:
        return DeadLetterRow(
            r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], codec.loads(r[8]), bool(r[9])
        )

    def list_dead(
        self, where: DeadLetterFilter, limit: int, before_id: int | None
    ) -> list[DeadLetterRow]:
        sql, args = self._dead_where(where, None)
        if before_id is not None:
            sql += " AND d.id < ?"
            args.append(before_id)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_DEAD_COLUMNS} FROM oncefire_deliveries d JOIN oncefire_events e"
                f" ON e.id = d.event_id WHERE {sql} ORDER BY d.id DESC LIMIT ?",
                [*args, limit],
            ).fetchall()
        return [self._dead_row(r) for r in rows]

    def get_dead(self, delivery_id: int) -> DeadLetterRow | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_DEAD_COLUMNS} FROM oncefire_deliveries d JOIN oncefire_events e"
                " ON e.id = d.event_id WHERE d.state = 'dead' AND d.id = ?",
                (delivery_id,),
            ).fetchone()
        return None if row is None else self._dead_row(row)

    def count_dead(self, where: DeadLetterFilter) -> int:
        sql, args = self._dead_where(where, None)
        with self._conn() as conn:
            row = conn.execute(f"SELECT count(*) FROM oncefire_deliveries d WHERE {sql}", args)
            return int(row.fetchone()[0])

    def replay(self, where: DeadLetterFilter, now: float, ids: Sequence[int] | None) -> int:
        sql, args = self._dead_where(where, ids)
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE oncefire_deliveries AS d SET state = 'pending', attempt = 0, run_at = ?,"
                " replayed_at = ?, error = NULL, dead_at = NULL, worker = NULL"
                f" WHERE {sql} AND d.truncated = 0",
                [now, now, *args],
            )
            return cursor.rowcount

    def dismiss(self, where: DeadLetterFilter, ids: Sequence[int] | None) -> int:
        sql, args = self._dead_where(where, ids)
        with self._tx() as conn:
            return conn.execute(f"DELETE FROM oncefire_deliveries AS d WHERE {sql}", args).rowcount

    # -- history -----------------------------------------------------------------------

    def counts(self, since: float) -> dict[str, FunctionCounts]:
        with self._tx("DEFERRED") as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM oncefire_functions")]
            out = {n: FunctionCounts({}, [], {}, 0, 0) for n in names}

            def entry(name: str) -> FunctionCounts:
                return out.setdefault(name, FunctionCounts({}, [], {}, 0, 0))

            for name, outcome, n in conn.execute(
                "SELECT function, outcome, count(*) FROM oncefire_attempts WHERE finished_at >= ?"
                " GROUP BY function, outcome",
                (since,),
            ):
                entry(name).outcomes[outcome] = n
            for name, duration in conn.execute(
                "SELECT function, finished_at - started_at FROM oncefire_attempts"
                " WHERE finished_at >= ? AND outcome IS NOT NULL",
                (since,),
            ):
                entry(name).durations.append(float(duration))
            for name, state, n in conn.execute(
                "SELECT function, 'pending', count(*) FROM oncefire_deliveries"
                " WHERE state = 'pending' GROUP BY function UNION ALL"
                " SELECT function, 'running', count(*) FROM oncefire_deliveries"
                " WHERE state = 'running' GROUP BY function UNION ALL"
                " SELECT function, 'dead', count(*) FROM oncefire_deliveries"
                " WHERE state = 'dead' GROUP BY function"
            ):
                entry(name).states[state] = n
            extra: dict[str, dict[str, int]] = {}
            for name, most in conn.execute(
                "SELECT function, max(n) FROM (SELECT function, count(*) AS n FROM"
                " oncefire_attempts WHERE finished_at >= ? GROUP BY function, event_id)"
                " GROUP BY function",
                (since,),
            ):
                extra.setdefault(name, {})["most"] = most
            for name, n in conn.execute(
                "SELECT function, count(*) FROM oncefire_dedupe_hits WHERE at >= ?"
                " GROUP BY function",
                (since,),
            ):
                extra.setdefault(name, {})["dedupe"] = n
        for name, values in extra.items():
            base = entry(name)
            out[name] = FunctionCounts(
                base.outcomes,
                base.durations,
                base.states,
                values.get("most", 0),
                values.get("dedupe", 0),
            )
        return out

    def delivery_states(self, event_id: str) -> list[tuple[str, str, int]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT function, state, attempt FROM oncefire_deliveries WHERE event_id = ?"
                " ORDER BY id",
                (event_id,),
            ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def attempts(self, event_id: str) -> list[dict[str, Any]]:
        with self._conn() as conn:
            # Each delivery's attempts in order (one runs at a time): those that ended, then
            # the one running now (its row is written when it ends).
            cursor = conn.execute(
                "SELECT delivery_id, function, number, worker, started_at, finished_at, outcome,"
                " error FROM (SELECT 0 AS running, * FROM oncefire_attempts WHERE event_id = ?"
                " UNION ALL SELECT 1, NULL, id, event_id, function, attempt, worker, claimed_at,"
                " NULL, NULL, NULL FROM oncefire_deliveries WHERE event_id = ?"
                " AND state = 'running') ORDER BY delivery_id, running, id",
                (event_id, event_id),
            )
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def record_dedupe(self, function: str, now: float) -> None:
        with self._tx() as conn:
            SqliteTx(conn).record_dedupe(function, now)

    def purge_expired_claims(self, now: float, limit: int) -> int:
        with self._tx() as conn:
            n = conn.execute(
                "DELETE FROM oncefire_claims WHERE key IN (SELECT key FROM oncefire_claims"
                " WHERE expires_at <= ? LIMIT ?)",
                (now, limit),
            ).rowcount
            n += conn.execute(
                "DELETE FROM oncefire_idempotency WHERE key IN (SELECT key FROM"
                " oncefire_idempotency WHERE expires_at <= ? AND lease_until <= ? LIMIT ?)",
                (now, now, limit),
            ).rowcount
        return n

    # -- @idempotent records: one statement each, committed on its own -----------------

    def _write_one(self, sql: str, args: Sequence[Any]) -> int:
        """Run one write statement, committed on its own (or in the thread's batch); the rows
        it changed. A statement that meets a busy writer waits busy_timeout inside SQLite,
        fails changing nothing, and is run again until the store's lock timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        with self._conn() as conn:
            while True:
                try:
                    return conn.execute(sql, args).rowcount
                except sqlite3.OperationalError as exc:
                    is_busy = "locked" in str(exc) or "busy" in str(exc)
                    if not is_busy or time.monotonic() >= deadline:
                        raise

    def claim_idempotency(self, record: IdempotencyRecord, now: float) -> bool:
        return (
            self._write_one(
                "INSERT INTO oncefire_idempotency (key, function, status, token, payload_hash,"
                " lease_until, expires_at, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET function = excluded.function,"
                " status = excluded.status, token = excluded.token,"
                " payload_hash = excluded.payload_hash, lease_until = excluded.lease_until,"
                " expires_at = excluded.expires_at, result = excluded.result"
                " WHERE oncefire_idempotency.expires_at <= ?",
                (*astuple(record), now),
            )
            == 1
        )

    def idempotency_record(self, key: str) -> IdempotencyRecord | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT key, function, status, token, payload_hash, lease_until, expires_at,"
                " result FROM oncefire_idempotency WHERE key = ?",
                (key,),
            ).fetchone()
        return None if row is None else IdempotencyRecord(*row)

    def take_over_idempotency(
        self, record: IdempotencyRecord, stale_token: str, now: float
    ) -> bool:
        return (
            self._write_one(
                "UPDATE oncefire_idempotency SET function = ?, status = ?, token = ?,"
                " payload_hash = ?, lease_until = ?, expires_at = ?, result = ?"
                " WHERE key = ? AND token = ? AND status = 'in_progress' AND lease_until <= ?",
                (*astuple(record)[1:], record.key, stale_token, now),
            )
            == 1
        )

    def complete_idempotency(
        self, key: str, token: str, now: float, expires_at: float, result_json: str | None
    ) -> bool:
        return (
            self._write_one(
                "UPDATE oncefire_idempotency SET status = 'completed', lease_until = ?,"
                " expires_at = ?, result = ? WHERE key = ? AND token = ?",
                (now, expires_at, result_json, key, token),
            )
            == 1
        )

    def release_idempotency(self, key: str, token: str) -> bool:
        return (
            self._write_one(
                "DELETE FROM oncefire_idempotency WHERE key = ? AND token = ?"
                " AND status = 'in_progress'",
                (key, token),
            )
            == 1
        )
