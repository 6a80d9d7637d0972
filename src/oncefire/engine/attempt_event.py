"""The Event a function receives for a leased delivery, built from the stored event."""

from __future__ import annotations

from oncefire.clock import to_datetime
from oncefire.errors import UndecodablePayloadError
from oncefire.events import Event, view_of
from oncefire.model import codec
from oncefire.stores.base import Leased
from oncefire.triggers import Trigger


def build_event(trigger: Trigger, leased: Leased) -> Event:
    """The Event object a function receives for a leased delivery."""
    stored = leased.event
    if isinstance(stored.data, codec.Undecodable):
        raise UndecodablePayloadError(f"The event's payload cannot be decoded: {stored.data.error}")
    return Event(
        id=stored.id,
        type=stored.type,
        source=stored.source,
        time=to_datetime(stored.time),
        data=view_of(stored, as_change=trigger.is_change),
        params=trigger.params_of(stored),
        attempt=leased.attempt,
        size=stored.size,
        function=trigger.name,
        raw=stored.data,
    )
