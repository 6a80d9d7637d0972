"""The scale-out store: PostgreSQL through psycopg 3 and a pool, shared by any number of workers.

What is the same on SQLite lives in SqlStore; here: connections, migrations, leasing (FOR
UPDATE SKIP LOCKED), ending deliveries in one statement each, waking on NOTIFY (with polling
behind it), and the one-statement document write. Every statement goes to the one server the
URL names: no decision reads a replica.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from oncefire.clock import Clock
from oncefire.events import StoredEvent
from oncefire.model import codec
from oncefire.model.buckets import DURATION_BOUNDS
from oncefire.model.paths import parent_of
from oncefire.model.rates import RateLimit, available
from oncefire.stores import queries
from oncefire.stores.base import Completed, Ending, Lease, Leased, Taken, error_group_of
from oncefire.stores.catalogue.cache import Catalog, CatalogCache, Fanout
from oncefire.stores.catalogue.tables import PostgresTableTriggers, TableTriggers
from oncefire.stores.connection import Statements
from oncefire.stores.documents.postgres_tx import PostgresTx, lock_key, set_document_args
from oncefire.stores.postgres.clock import DatabaseClock
from oncefire.stores.postgres.listener import Listener
from oncefire.stores.postgres.pool import POOL_MAX, POOL_MIN, Pool, PooledStatements
from oncefire.stores.postgres.statements import PostgresStatements, expired_leases, floats
from oncefire.stores.queue.rates import Buckets
from oncefire.stores.records.sql import completions_arg
from oncefire.stores.sql_store import SqlStore

SQL = queries.load("postgres")


def _ending(lease: Lease, result: Ending, **more: Any) -> dict[str, Any]:
    """The parameters of a statement that ends a delivery under lease and writes its attempt."""
    return {
        "id": lease.delivery_id,
        "token": lease.token,
        "finished_at": result.finished_at,
        "started_at": result.started_at,
        "outcome": result.outcome,
        "error": result.error,
        "cpu_seconds": result.cpu_seconds,
        "reads": result.reads,
        "writes": result.writes,
        "bounds": list(DURATION_BOUNDS),
        **more,
    }


class PostgresStore(SqlStore):
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

    @contextmanager
    def transaction(self) -> Iterator[PostgresTx]:
        """A write transaction for documents and events, pipelined."""
        with self.pool.transaction(is_pipelined=True) as conn:
            yield PostgresTx(conn, is_write=True, catalogs=self._catalogs)

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        """A read-only snapshot for document reads and queries."""
        with self.pool.snapshot() as conn:
            yield PostgresTx(conn, is_write=False, catalogs=self._catalogs)

    def set_document(
        self,
        path: str,
        data_json: str,
        now: float,
        event_id: str,
        fanout_of: Callable[[Catalog], Fanout | None],
    ) -> bool:
        """Write a whole document and its event in one statement (one round trip); False,
        having written nothing, when the catalogue changed or the row is from before schema
        6 or holds numbers jsonb would not give back as written (codec.is_jsonb_exact): the
        caller then writes through a transaction, whose event counts what jsonb gives back."""
        catalog = self._catalogs.last()
        fanout = None if catalog is None else fanout_of(catalog)
        if catalog is None or fanout is None or not codec.is_jsonb_exact(data_json):
            return False
        args = set_document_args(
            catalog,
            fanout,
            path=path,
            collection=parent_of(path),
            data_json=data_json,
            now=now,
            event_id=event_id,
        )
        return bool(self._pooled.fetch("set_document", args)[0][0] != "stale")

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

    @contextmanager
    def _index_transaction(self) -> Iterator[tuple[PostgresStatements, PostgresTx]]:
        """A write transaction that waits for document writes in flight and holds off new
        ones (lock_documents_for_index) until it commits."""
        with self._write() as st:
            st.execute("lock_documents_for_index")
            yield st, PostgresTx(st.conn, is_write=True)

    # -- deliveries --------------------------------------------------------------------

    def take_due(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
        rates: Mapping[str, RateLimit] | None = None,
        is_alone: bool = False,
        is_ahead: bool = False,
        free: int = 0,
    ) -> list[Taken]:
        """Take due pending deliveries, count their attempt, and lease them to worker (a solo
        one only alone, see Store.lease_due)."""
        if not functions or limit <= 0 or (delivery_ids is not None and not delivery_ids):
            return []
        self._listener.working()
        offset = self.database_clock.offset()
        rated = {f: r for f, r in (rates or {}).items() if f in functions}
        token = uuid.uuid4().hex  # one a lease batch: the lease is the delivery id with it
        args: dict[str, Any] = {
            "token": token,
            "now": now,
            "lease_until": lease_until + offset,
            "worker": worker,
            "limit": limit,
            "free": list(functions),
            "ids": list(delivery_ids or ()),
            "is_alone": is_alone,
            "is_ahead": is_ahead,
            "free_slots": free,
        }
        if not caps and not rated:  # one round trip: an idle worker's lease is on the path
            rows = self.pool.run_with(SQL["no_bitmap_scans"], SQL["lease_due"], args)
        else:
            with self._write() as st:
                st.execute("no_bitmap_scans")
                room = self._room(st, caps, now + offset) if caps else {}
                buckets = Buckets(st, rated, now, lock=True) if rated else None
                if buckets is not None:
                    for name, tokens in buckets.tokens.items():
                        room[name] = min(room.get(name, limit), available(tokens))
                capped = [(f, n) for f, n in room.items() if f in functions and n > 0]
                args["free"] = [f for f in functions if f not in room]
                args["capped"] = [f for f, _ in capped]
                args["rooms"] = [min(n, limit) for _, n in capped]
                if not args["free"] and not capped:
                    return []
                rows = st.fetch("lease_due_capped" if capped else "lease_due", args)
                if buckets is not None:
                    buckets.spend(st, [(r[1], r[13]) for r in rows])
        return [  # the events come in the lease's own statement
            Taken(Lease(r[0], token), r[1], r[2], now, r[3], r[11], r[12], StoredEvent(*r[3:11]))
            for r in rows
        ]

    @staticmethod
    def _room(st: PostgresStatements, caps: dict[str, int], now: float) -> dict[str, int]:
        """Free slots per capped function, counted under a lock every worker leasing it takes."""
        names = sorted(caps)  # one lock order everywhere, so leasing workers never deadlock
        for name in names:
            st.execute("lock_function", {"key": lock_key("function", name)})
        rows = st.fetch("running_counts", {"now": now, "functions": names})
        running = {r[0]: int(r[1]) for r in rows}
        return {name: caps[name] - running.get(name, 0) for name in names}

    def complete(self, lease: Lease, result: Ending) -> bool:
        """Make a delivery succeeded and write its attempt, in one statement."""
        return len(self._pooled.fetch("end_succeeded", _ending(lease, result))) == 1

    def complete_many(self, items: Sequence[tuple[Lease, Ending]]) -> Completed:
        """complete() for many deliveries and the records their endings completed, at once."""
        if not items:
            return Completed(set(), set())
        args = {
            "ids": [lease.delivery_id for lease, _ in items],
            "tokens": [lease.token for lease, _ in items],
            "finished": floats([result.finished_at for _, result in items]),
            "started": floats([result.started_at for _, result in items]),
            "cpu": floats([result.cpu_seconds for _, result in items]),
            "reads": [result.reads for _, result in items],
            "writes": [result.writes for _, result in items],
            "bounds": list(DURATION_BOUNDS),
            "completions": completions_arg([c for _, r in items for c in r.completions]),
        }
        rows = self._pooled.fetch("end_succeeded_many", args)
        return Completed(
            {r[0] for r in rows if r[1] is None}, {r[1] for r in rows if r[1] is not None}
        )

    def retry(self, lease: Lease, result: Ending, run_at: float) -> bool:
        """Make a delivery pending again, due at run_at (a retry due at once wakes a worker)."""
        args = _ending(lease, result, run_at=run_at, is_due=run_at <= result.end)
        return len(self._pooled.fetch("end_retried", args)) == 1

    def bury(self, lease: Lease, result: Ending, error: str | None, truncated: str | None) -> bool:
        """Make a delivery dead; truncated, if given, replaces its stored payload."""
        args = _ending(
            lease,
            result,
            dead_error=error,
            error_group=error_group_of(error),
            is_truncated=truncated is not None,
            truncated=truncated,
        )
        return len(self._pooled.fetch("end_dead", args)) == 1

    def forward(
        self, lease: Lease, result: Ending, event: StoredEvent, functions: Sequence[str]
    ) -> bool:
        """Finish a delivery by publishing its event on a dead-letter topic, atomically."""
        with self._write() as st:
            if len(st.fetch("end_forwarded", _ending(lease, result))) != 1:
                return False
            PostgresTx(st.conn, is_write=True).append(event, functions, event.time)
            return True

    def release(
        self, leases: Sequence[Lease], *, is_solo: bool = False, run_at: float | None = None
    ) -> int:
        """Hand running deliveries back to pending without counting their attempt."""
        if not leases:
            return 0
        args: dict[str, Any] = {
            "ids": [x.delivery_id for x in leases],
            "tokens": [x.token for x in leases],
            "is_solo": is_solo,
            "run_at": run_at,
        }
        rows = self._pooled.fetch("release_leases", args)
        return int(rows[0][0]) if rows else 0

    def start(self, leases: Sequence[Lease], now: float, *, is_ahead: bool = False) -> set[int]:
        """Mark leased deliveries started, if their lease still holds; the ids marked."""
        if not leases:
            return set()
        args = {
            "now": now,
            "is_ahead": is_ahead,
            "ids": [x.delivery_id for x in leases],
            "tokens": [x.token for x in leases],
        }
        return {int(r[0]) for r in self._pooled.fetch("start_leases", args)}

    def renew(self, leases: Sequence[Lease], now: float, lease_until: float) -> list[Lease]:
        """Extend leases still held and not yet run out; return those."""
        if not leases:
            return []
        offset = self.database_clock.offset()
        args = {
            "lease_until": lease_until + offset,
            "ids": [x.delivery_id for x in leases],
            "tokens": [x.token for x in leases],
            "now": now + offset,
        }
        kept = {int(r[0]) for r in self._pooled.fetch("renew_leases", args)}
        return [lease for lease in leases if lease.delivery_id in kept]

    def expired_leases(self, now: float, functions: Sequence[str], limit: int) -> list[Leased]:
        """Running deliveries whose lease ran out before now (their worker died)."""
        if not functions:
            return []
        args = {"now": now + self.database_clock.offset(), "functions": list(functions)}
        args["limit"] = limit
        return expired_leases(self._pooled.fetch("expired_leases", args), now)

    def take_expired_leases(
        self, now: float, lease_until: float, functions: Sequence[str], limit: int
    ) -> list[Leased]:
        """Re-lease deliveries whose lease ran out to the caller, in one statement that skips
        rows another rescuer holds (FOR UPDATE SKIP LOCKED)."""
        if not functions:
            return []
        offset = self.database_clock.offset()
        args: dict[str, Any] = {"now": now + offset, "lease_until": lease_until + offset}
        args |= {"token": uuid.uuid4().hex, "functions": list(functions), "limit": limit}
        return expired_leases(self._pooled.fetch("take_expired_leases", args), now)

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout, returning early on a NOTIFY of new work (postgres_listener)."""
        self._listener.wait(timeout)
