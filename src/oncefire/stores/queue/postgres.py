"""The delivery queue on PostgreSQL: a lease in one statement (FOR UPDATE SKIP LOCKED) that
reads its events too, each ending one statement that also writes the attempt row and its hour
bucket, rescue that skips rows another rescuer holds, and a wait woken by NOTIFY. Lease times
follow the database's clock when the app runs on the system's (postgres/clock.py)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from oncefire.events import StoredEvent
from oncefire.model.buckets import DURATION_BOUNDS
from oncefire.model.rates import RateLimit, available
from oncefire.stores import queries
from oncefire.stores.connection import Row
from oncefire.stores.documents.postgres_tx import PostgresTx, lock_key
from oncefire.stores.postgres.clock import DatabaseClock
from oncefire.stores.postgres.listener import Listener
from oncefire.stores.postgres.pool import Pool, PooledStatements
from oncefire.stores.postgres.statements import PostgresStatements
from oncefire.stores.queue.rates import Buckets
from oncefire.stores.queue.types import Completed, Ending, Lease, Leased, Taken
from oncefire.stores.reads.dead_rows import error_group_of
from oncefire.stores.records.sql import completions_arg

SQL = queries.load("postgres")


class LeaseRow(NamedTuple):
    """A row of lease_due and lease_due_capped: the delivery leased and its event."""

    delivery_id: int
    function: str
    attempt: int
    event_id: str
    type: str
    source: str
    time: float
    data: Any
    size: int
    root_id: str | None
    depth: int
    replayed_at: float | None
    solo: bool
    run_at: float

    def taken(self, token: str, now: float) -> Taken:
        """The delivery as taken under the lease token, with its event."""
        event = _event(self)
        lease = Lease(self.delivery_id, token)
        return Taken(
            lease,
            self.function,
            self.attempt,
            now,
            self.event_id,
            self.replayed_at,
            self.solo,
            event,
        )


class ExpiredRow(NamedTuple):
    """A row of expired_leases and take_expired_leases: a delivery whose lease ran out."""

    delivery_id: int
    lease_token: str
    function: str
    attempt: int
    started_at: float | None
    event_id: str
    type: str
    source: str
    time: float
    data: Any
    size: int
    root_id: str | None
    depth: int
    ahead: bool

    def leased(self, now: float) -> Leased:
        """The delivery as Leased.run_out makes it."""
        event = _event(self)
        head = (self.function, self.attempt, self.started_at)
        return Leased.run_out(
            Lease(self.delivery_id, self.lease_token), head, event, self.ahead, now
        )


def _event(row: LeaseRow | ExpiredRow) -> StoredEvent:
    """The event read in a lease's or a rescue's statement."""
    return StoredEvent(
        row.event_id, row.type, row.source, row.time, row.data, row.size, row.root_id, row.depth
    )


def run_out(rows: list[Row], now: float) -> list[Leased]:
    """The deliveries of expired_leases rows, by the names of their columns."""
    return [ExpiredRow(*r).leased(now) for r in rows]


def floats(values: Sequence[float | None]) -> list[float | None]:
    """Values for a binary float8[] parameter (`%(x)b`), which takes one Python type: an int
    among floats (a custom clock's time) is refused, so each is made a float."""
    return [None if v is None else float(v) for v in values]


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


class PostgresQueue:
    """Mixed into PostgresStore: the queue operations whose SQL is PostgreSQL's own."""

    pool: Pool
    _pooled: PooledStatements
    _listener: Listener
    database_clock: DatabaseClock

    def _write(self) -> AbstractContextManager[PostgresStatements]:
        raise NotImplementedError

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
        one only alone, see Queue.lease_due)."""
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
                    spent = [LeaseRow(*r) for r in rows]
                    buckets.spend(st, [(r.function, r.run_at) for r in spent])
        return [LeaseRow(*r).taken(token, now) for r in rows]  # events read in the lease

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
        return run_out(self._pooled.fetch("expired_leases", args), now)

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
        return run_out(self._pooled.fetch("take_expired_leases", args), now)

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout, returning early on a NOTIFY of new work (postgres_listener)."""
        self._listener.wait(timeout)
