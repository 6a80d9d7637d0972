"""A lease in two steps, for both databases: take the due deliveries (the dialect's take_due,
inside the write transaction), then read the events it left unread (after the commit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from oncefire.events import StoredEvent
from oncefire.stores.queue.types import Leased, Taken


class Leasing:
    """lease_due and with_events over a dialect's take_due and _events_by_id."""

    take_due: Callable[..., list[Taken]]  # the dialect's (see Store.take_due)

    def _events_by_id(self, ids: Sequence[str]) -> dict[str, StoredEvent]:
        """The events of these ids, read outside any write transaction of this store's."""
        raise NotImplementedError

    def lease_due(self, **ask: Any) -> list[Leased]:
        """Take due deliveries with their events (see Store.lease_due)."""
        return self.with_events(self.take_due(**ask))

    def with_events(self, taken: Sequence[Taken]) -> list[Leased]:
        """What take_due took, with the events it left unread read in one query."""
        unread = list({t.event_id for t in taken if t.event is None})
        read = self._events_by_id(unread) if unread else {}
        return [t.leased(t.event or read[t.event_id]) for t in taken]
