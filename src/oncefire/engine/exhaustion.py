"""How an exhausted delivery ends: republished on its dead-letter topic when something
subscribes to it, else a dead letter with its full payload."""

from __future__ import annotations

from oncefire.engine.ordering import ordering_note
from oncefire.events import EventType
from oncefire.model.messages import dead_letter_message
from oncefire.model.outbox import subscribers
from oncefire.stores.base import Ending, Leased, Store
from oncefire.triggers import Trigger


def end_exhausted(
    store: Store,
    trigger: Trigger,
    leased: Leased,
    result: Ending,
    error: str | None,
    *,
    may_forward: bool,
    now: float,
) -> tuple[bool, str]:
    """End an exhausted delivery. Returns whether the lease still held, and what became of
    the delivery (for the log)."""
    topic = trigger.dead_letter_topic
    if topic is not None and may_forward:
        event = dead_letter_message(trigger, leased, now)
        with store.read() as tx:
            names = subscribers(tx.functions(), EventType.MESSAGE_PUBLISHED, topic, event.data)
        if names:
            return store.forward(leased.lease, result, event, names), (
                f"forwarded to topic {topic}"
            )
        error = f"not forwarded: nothing subscribes to dead-letter topic {topic}: {error}"
        ended_as = f"dead letter (nothing subscribes to topic {topic})"
    else:
        ended_as = "dead letter"
    error = ordering_note(store, trigger.options.ordered_by, leased, error)
    return store.bury(leased.lease, result, error, None), ended_as
