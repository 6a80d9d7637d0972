"""The delivery queue's operations that are the same on SQLite and PostgreSQL, over named
queries (`sql/<dialect>/deliveries.sql`, `rates.sql`): a lease in two steps (the dialect's
take_due, then the events it left unread), rate tokens, ordering keys and the next due time."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from oncefire.events import StoredEvent
from oncefire.model.rates import RateLimit
from oncefire.stores.connection import Row, Statements
from oncefire.stores.queue.rates import Buckets
from oncefire.stores.queue.types import Leased, Taken


def before_solo(candidates: Sequence[Row], is_alone: bool) -> list[int]:
    """The ids a lease takes of due (run_at, id, solo) rows in lease order: those before the
    first solo one, or that one alone when it comes first and the worker is alone."""
    for n, (_, delivery_id, solo) in enumerate(candidates):
        if solo:
            return [delivery_id] if n == 0 and is_alone else [r[1] for r in candidates[:n]]
    return [r[1] for r in candidates]


def is_head_started(free: int, leased: int) -> bool:
    """Whether a lease marks its first delivery started, not ahead: it starts alone, now (one
    slot is free, or it is the only one leased and a slot is free; with no slot free it waits
    for a thread, so whether it ran would not be known)."""
    return free == 1 or (leased == 1 and free >= 1)


class SqlQueue:
    """Mixed into SqlStore: lease_due and with_events over the dialect's take_due, and the
    queue's reads and writes that need no dialect of their own."""

    take_due: Callable[..., list[Taken]]  # the dialect's (see Queue.take_due)

    def _one(self) -> Statements:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def _decode(self, value: Any) -> Any:
        raise NotImplementedError

    def _events_by_id(self, ids: Sequence[str]) -> dict[str, StoredEvent]:
        """The events of these ids, read outside any write transaction of this store's."""
        raise NotImplementedError

    def lease_due(self, **ask: Any) -> list[Leased]:
        """Take due deliveries with their events (see Queue.lease_due)."""
        return self.with_events(self.take_due(**ask))

    def with_events(self, taken: Sequence[Taken]) -> list[Leased]:
        """What take_due took, with the events it left unread read in one query."""
        unread = list({t.event_id for t in taken if t.event is None})
        read = self._events_by_id(unread) if unread else {}
        return [t.leased(t.event or read[t.event_id]) for t in taken]

    def rate_tokens(self, rates: Mapping[str, RateLimit], now: float) -> dict[str, float]:
        """The tokens each rate-limited function's bucket holds at `now` (read only)."""
        if not rates:
            return {}
        with self._snapshot() as st:
            return Buckets(st, rates, now, lock=False).tokens

    def later_of_key(self, delivery_id: int, limit: int) -> tuple[str | None, list[str]]:
        """A delivery's ordering key (None: it has none) and the ids of up to `limit` events
        of its key that wait behind it."""
        rows = self._one().fetch("later_of_key", {"id": delivery_id, "limit": limit})
        if not rows:
            return None, []
        return rows[0][0], [r[1] for r in rows if r[1] is not None]

    def unkeyed_deliveries(
        self, functions: Sequence[str], limit: int
    ) -> list[tuple[int, str, int, StoredEvent]]:
        """(delivery id, function, attempt, event) of up to limit pending deliveries whose
        ordering key is not computed yet, oldest first."""
        rows = self._one().fetch(
            "unkeyed_deliveries", {"functions": list(functions), "limit": limit}
        )
        unkeyed = []
        for delivery_id, function, attempt, event_id, type_, source, at, data, size in rows:
            event = StoredEvent(event_id, type_, source, at, self._decode(data), size)
            unkeyed.append((delivery_id, function, attempt, event))
        return unkeyed

    def key_deliveries(
        self, keys: Sequence[tuple[int, str]], errors: Sequence[tuple[int, str]], now: float
    ) -> None:
        """Set the computed ordering key of each (delivery id, key), and make each (delivery id,
        error) whose key could not be computed a dead letter, in one transaction."""
        with self._write() as st:
            if keys:
                st.execute_many("set_ordering_key", [{"id": i, "key": k} for i, k in keys])
            if errors:
                bury = [{"id": i, "error": e, "now": now} for i, e in errors]
                st.execute_many("bury_unkeyed", bury)

    def next_due(self, functions: Sequence[str]) -> float | None:
        """The earliest run_at of a pending delivery, or None."""
        if not functions:
            return None
        rows = self._one().fetch("next_due", {"functions": list(functions)})
        return None if rows[0][0] is None else float(rows[0][0])
