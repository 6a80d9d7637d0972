"""The delivery queue on SQLite: a lease under BEGIN IMMEDIATE over a walk of the due index,
its events read after the commit; ending a delivery writes its attempt row and hour buckets in
the same transaction; a wait wakes on a write to the WAL file."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from oncefire.events import StoredEvent
from oncefire.model import buckets, codec
from oncefire.model.rates import RateLimit, available
from oncefire.stores.connection import Row, SqliteStatements, Statements
from oncefire.stores.documents.sqlite_tx import SqliteTx
from oncefire.stores.queue.rates import Buckets
from oncefire.stores.queue.sql import before_solo, is_head_started
from oncefire.stores.queue.types import Completed, Ending, Lease, Leased, Taken
from oncefire.stores.reads.dead_rows import error_group_of
from oncefire.stores.records.sql import complete_records
from oncefire.stores.sqlite.connections import SqliteConnections
from oncefire.stores.sqlite.filewatch import FileWatch


def write_attempts(
    st: SqliteStatements, ended: Sequence[Row], results: Mapping[int, Ending]
) -> None:
    """The attempt rows of deliveries that just ended: an attempt is written once, when
    it ends; until then its delivery tells of it."""
    rows: list[Row] = []  # in insert_attempt's column order: bound by position
    figures: list[buckets.Figures] = []
    for delivery_id, event_id, function, number, worker, marked_at in ended:
        result = results[delivery_id]
        started = next(
            t for t in (result.started_at, marked_at, result.finished_at) if t is not None
        )
        finished, outcome, error = result.end, result.outcome, result.error
        cpu, reads, writes = result.cpu_seconds, result.reads, result.writes
        row = (delivery_id, event_id, function, number, worker, started, finished, outcome, error)
        rows.append((*row, cpu, reads, writes))
        figures.append((function, number, started, finished, outcome, cpu, reads, writes))
    st.execute_many("insert_attempt", rows)
    # In the same transaction: the buckets never disagree with the attempt rows. Their
    # triggers add the same to the totals that only grow (schema 27).
    st.execute_many("add_to_bucket", buckets.rows_for(figures))


def expired_leased(
    st: SqliteStatements, event_of: Callable[[Row], StoredEvent], rows: list[Row], now: float
) -> list[Leased]:
    """Leased deliveries of rows (id, token, function, attempt, event id, started_at, ahead)."""
    ids = list({event_id for _, _, _, _, event_id, _, _ in rows})
    events = {e[0]: e for e in st.fetch("events_by_id", {"ids": ids})} if rows else {}
    leased = []
    for delivery_id, token, function, attempt, event_id, started_at, ahead in rows:
        head = (function, attempt, started_at)
        event = event_of(events[event_id])
        leased.append(Leased.run_out(Lease(delivery_id, token), head, event, ahead, now))
    return leased


class SqliteQueue:
    """Mixed into SqliteStore: the queue operations whose SQL or steps are SQLite's own."""

    connections: SqliteConnections
    is_memory: bool
    path: str
    _watch: FileWatch | None

    def _one(self) -> Statements:
        raise NotImplementedError

    def _write(self, mode: str = "IMMEDIATE") -> AbstractContextManager[SqliteStatements]:
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[SqliteStatements]:
        raise NotImplementedError

    @staticmethod
    def _event(row: Row) -> StoredEvent:
        # Decoded once the transaction has ended: the write lock is held no longer than needed.
        event_id, type_, source, at, data, size, root_id, depth = row
        data = codec.loads_or_undecodable(data)  # a bad row fails its delivery, not the lease
        return StoredEvent(event_id, type_, source, at, data, size, root_id, depth)

    def _events_by_id(self, ids: Sequence[str]) -> dict[str, StoredEvent]:
        # An event is never changed once written, nor purged while a delivery of it runs.
        return {row[0]: self._event(row) for row in self._one().fetch("events_by_id", {"ids": ids})}

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
        one only alone, see Queue.lease_due); their events are read by with_events."""
        if not functions:
            return []
        token = uuid.uuid4().hex  # one a lease batch: the lease is the delivery id with it
        rated = {f: r for f, r in (rates or {}).items() if f in functions}
        with self._write() as st:
            room = self._room(st, caps, now)
            buckets = Buckets(st, rated, now, lock=False) if rated else None
            if buckets is not None:
                for name, tokens in buckets.tokens.items():
                    room[name] = min(room.get(name, limit), available(tokens))
            # The uncapped functions, then each capped function up to its room: a capped
            # function's backlog never hides another function's due deliveries.
            uncapped = [f for f in functions if f not in room]
            groups = [(uncapped, limit)] if uncapped else []
            groups += [([f], min(room[f], limit)) for f in functions if room.get(f, 0) > 0]
            candidates: list[Row] = []
            for names, most in groups:
                args = {
                    "now": now,
                    "functions": names,
                    "has_ids": delivery_ids is not None,
                    "ids": list(delivery_ids or ()),
                    "limit": most,
                }
                candidates += st.fetch("due_deliveries", args)
            chosen = before_solo(sorted(candidates)[:limit], is_alone)
            if not chosen:
                return []
            taken = st.fetch(
                "lease_deliveries",
                {
                    "token": token,
                    "lease_until": lease_until,
                    "worker": worker,
                    "now": now,
                    "ids": chosen,
                    "is_ahead": is_ahead,
                    "head": chosen[0] if is_ahead and is_head_started(free, len(chosen)) else None,
                },
            )
            if buckets is not None:
                buckets.spend(st, [(t[2], t[0]) for t in taken])
        return [
            Taken(Lease(d, token), f, n, now, e, replayed, is_solo=bool(solo))
            for _, d, f, n, e, replayed, solo in sorted(taken)
        ]

    @staticmethod
    def _room(st: SqliteStatements, caps: dict[str, int], now: float) -> dict[str, int]:
        if not caps:
            return {}
        rows = st.fetch("running_counts", {"now": now, "functions": list(caps)})
        running: dict[str, int] = dict(rows)
        return {name: cap - running.get(name, 0) for name, cap in caps.items()}

    def _end(
        self, st: SqliteStatements, name: str, lease: Lease, result: Ending, **args: Any
    ) -> bool:
        """End a running delivery held by lease with statement `name`, and write its attempt;
        False (nothing written) when the lease is no longer held."""
        args = {
            "id": lease.delivery_id,
            "token": lease.token,
            "finished_at": result.finished_at,
            **args,
        }
        ended = st.fetch(name, args)
        write_attempts(st, ended, {lease.delivery_id: result})
        return bool(ended)

    def complete(self, lease: Lease, result: Ending) -> bool:
        """Make a delivery succeeded."""
        with self._write() as st:
            return self._end(st, "end_succeeded", lease, result)

    def complete_many(self, items: Sequence[tuple[Lease, Ending]]) -> Completed:
        """complete() for many deliveries, with the records their endings completed."""
        by_token = _by_token([lease for lease, _ in items])
        latest: dict[str, float] = {}
        for lease, result in items:
            latest[lease.token] = max(latest.get(lease.token, 0.0), result.end)
        results = {lease.delivery_id: result for lease, result in items}
        ended: list[Row] = []
        with self._write() as st:
            for token, ids in by_token.items():
                args = {"token": token, "ids": ids, "finished_at": latest[token]}
                ended += st.fetch("end_succeeded_of_token", args)
            write_attempts(st, ended, results)
            records = complete_records(st, [c for _, r in items for c in r.completions])
        return Completed({row[0] for row in ended}, records)

    def retry(self, lease: Lease, result: Ending, run_at: float) -> bool:
        """Make a delivery pending again, due at run_at."""
        with self._write() as st:
            args = {"run_at": run_at, "error": result.error, "outcome": result.outcome}
            return self._end(st, "end_retried", lease, result, **args)

    def bury(self, lease: Lease, result: Ending, error: str | None, truncated: str | None) -> bool:
        """Make a delivery dead; truncated, if given, replaces its stored payload."""
        with self._write() as st:
            done = self._end(
                st,
                "end_dead",
                lease,
                result,
                dead_error=error,
                error_group=error_group_of(error),
                is_truncated=int(truncated is not None),
                truncated=truncated,
            )
            if done and truncated is not None:
                st.execute("truncate_payload", {"truncated": truncated, "id": lease.delivery_id})
            return done

    def forward(
        self, lease: Lease, result: Ending, event: StoredEvent, functions: Sequence[str]
    ) -> bool:
        """Finish a delivery by publishing its event on a dead-letter topic, atomically."""
        with self._write() as st:
            done = self._end(st, "end_forwarded", lease, result, error=result.error)
            if done:
                SqliteTx(st.conn).append(event, functions, event.time)
            return done

    def release(
        self, leases: Sequence[Lease], *, is_solo: bool = False, run_at: float | None = None
    ) -> int:
        """Hand running deliveries back to pending without counting their attempt."""
        args = {"is_solo": is_solo, "run_at": run_at}
        with self._write() as st:
            return sum(
                st.count("release_leases", {"token": token, "ids": ids, **args})
                for token, ids in _by_token(leases).items()
            )

    def start(self, leases: Sequence[Lease], now: float, *, is_ahead: bool = False) -> set[int]:
        """Mark leased deliveries started, if their lease still holds; the ids marked."""
        args = {"now": now, "is_ahead": is_ahead}
        with self._write() as st:
            return {
                row[0]
                for token, ids in _by_token(leases).items()
                for row in st.fetch("start_leases", {"token": token, "ids": ids, **args})
            }

    def renew(self, leases: Sequence[Lease], now: float, lease_until: float) -> list[Lease]:
        """Extend leases still held and not yet run out; return those."""
        times = {"now": now, "lease_until": lease_until}
        with self._write() as st:
            kept = {
                row[0]
                for token, ids in _by_token(leases).items()
                for row in st.fetch("renew_leases", {"token": token, "ids": ids, **times})
            }
        return [lease for lease in leases if lease.delivery_id in kept]

    def expired_leases(self, now: float, functions: Sequence[str], limit: int) -> list[Leased]:
        """Running deliveries whose lease ran out before now (their worker died)."""
        if not functions:
            return []
        with self._snapshot() as st:
            args = {"now": now, "functions": list(functions), "limit": limit}
            return expired_leased(st, self._event, st.fetch("expired_leases", args), now)

    def take_expired_leases(
        self, now: float, lease_until: float, functions: Sequence[str], limit: int
    ) -> list[Leased]:
        """Re-lease deliveries whose lease ran out to the caller, in one write transaction."""
        if not functions:
            return []
        args = {"now": now, "lease_until": lease_until, "token": uuid.uuid4().hex}
        args |= {"functions": list(functions), "limit": limit}
        with self._write() as st:
            return expired_leased(
                st, self._event, sorted(st.fetch("take_expired_leases", args)), now
            )

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout, returning early when another writer committed."""
        # Every commit writes the WAL file, so a write to it tells of possible new work.
        if self.is_memory:
            time.sleep(timeout)
            return
        if self._watch is None:
            self._watch = FileWatch(self.path + "-wal", wake=self.connections.wake)
        self._watch.wait(timeout)


def _by_token(leases: Sequence[Lease]) -> dict[str, list[int]]:
    """The delivery ids of leases by token: a lease batch shares one, so one statement a
    token does what one a delivery would."""
    ids: dict[str, list[int]] = {}
    for lease in leases:
        ids.setdefault(lease.token, []).append(lease.delivery_id)
    return ids
