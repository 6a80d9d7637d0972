"""Ordering: the deliveries of one key run one at a time, in event order.

The key is a document's path (`ordering="document"`, set by the store on insert) or what the
function's `ordering_key` returns (computed by a worker serving it before its lease; '' until
then, and never leased so). A lease passes over a delivery while an earlier one of its key
is pending or running: a failing delivery holds its key back until it succeeds or becomes a
dead letter, which names the later events that then run past it.
"""

from __future__ import annotations

from collections.abc import Mapping

from oncefire.engine.attempt_event import build_event
from oncefire.stores.base import Lease, Leased, Store
from oncefire.triggers import Trigger

NAMED_AT_MOST = 20  # later events a dead letter names; past that it says how it was cut
KEY_BATCH = 500  # deliveries keyed in one transaction
MOST_KEY_BATCHES = 10  # batches keyed before one lease, so a lease stays short


def compute_key(trigger: Trigger, leased: Leased) -> tuple[str | None, str | None]:
    """(key, None) from the function's ordering_key callable, or (None, error) when it raised
    or returned something else than a non-empty str or an int."""
    key_of = trigger.options.ordering_key
    if key_of is None:
        return None, f"function {trigger.name} has no ordering_key"
    try:
        value = key_of(build_event(trigger, leased))
    except Exception as exc:
        return None, f"ordering_key raised {type(exc).__name__}: {exc}"
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or value == "":
        return None, (
            f"ordering_key returned {value!r}: it must return a non-empty str (or an int); "
            "fix it and replay this dead letter"
        )
    return value, None


def key_deliveries(store: Store, triggers: Mapping[str, Trigger], now: float) -> int:
    """Compute the ordering key of the pending deliveries of these functions (ordered by
    ordering_key) that have none yet, oldest first; a delivery whose key cannot be computed
    becomes a dead letter saying why. How many were keyed or buried."""
    if not triggers:
        return 0
    done = 0
    for _ in range(MOST_KEY_BATCHES):
        found = store.unkeyed_deliveries(list(triggers), KEY_BATCH)
        keys: list[tuple[int, str]] = []
        errors: list[tuple[int, str]] = []
        for delivery_id, function, attempt, event in found:
            # The event as the function will see it; attempt is the one to come.
            leased = Leased(Lease(delivery_id, ""), function, attempt + 1, now, event)
            key, error = compute_key(triggers[function], leased)
            if key is not None:
                keys.append((delivery_id, key))
            else:
                errors.append((delivery_id, error or "ordering_key failed"))
        if found:
            store.key_deliveries(keys, errors, now)
            done += len(found)
        if len(found) < KEY_BATCH:
            break
    return done


def ordering_note(
    store: Store, ordering: str | None, leased: Leased, error: str | None
) -> str | None:
    """A dead letter's error, with the events of its ordering key that now run past it (a
    function registered without ordering: the error as it is)."""
    if ordering is None:
        return error
    key, later = store.later_of_key(leased.lease.delivery_id, NAMED_AT_MOST + 1)
    if key is None:
        return error
    if not later:
        note = f"ordering key {key}: no later event of this key was waiting"
    else:
        named = ", ".join(later[:NAMED_AT_MOST])
        more = " and more" if len(later) > NAMED_AT_MOST else ""
        note = f"ordering key {key}: later events run past this dead letter: {named}{more}"
    return f"{error}; {note}" if error else note
