"""What the idempotency contract tests (tests/contract/records/test_idempotency_*.py) share:
the retry policy and lease, order events, the stored record of a key, and a gate that
holds a delivery inside its run in another thread."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oncefire import App, Increment, RetryPolicy, idempotent
from oncefire.clock import to_datetime
from oncefire.events import Event
from oncefire.idempotency import record_key
from oncefire.stores.base import IdempotencyRecord
from oncefire.testing import TestClock, deliver, make_event

LEASE = 30.0
POLICY = RetryPolicy(max_attempts=4, first_delay=60, multiplier=2)
WAIT = 10.0  # seconds a test waits for another thread before it fails


class Boom(Exception):
    """A failure inside a function."""


def order_event(order_id: str = "o1", amount: int = 500, **fields: Any) -> Any:
    """The event of a new order document."""
    return make_event("document.created", f"orders/{order_id}", {"amount": amount, **fields})


def record_of(
    app: App, key: str, function: str = "charge", helper: str | None = None
) -> IdempotencyRecord | None:
    """The stored @idempotent record of a helper's key in a function (by default the helper
    is charge_function's charge_once, or the function itself)."""
    if helper is not None:
        return app.store.idempotency_record(record_key(function, helper, key))
    record = app.store.idempotency_record(record_key(function, "charge_once", key))
    return record or app.store.idempotency_record(record_key(function, function, key))


def counter(app: App, path: str = "stats/orders") -> Any:
    return app.db.document(path).get().get("n")


def outcomes(app: App, event_id: str, function: str) -> list[str]:
    """The outcome of each attempt of one function on one event, oldest first."""
    return [a["outcome"] for a in app.store.attempts(event_id) if a["function"] == function]


class Gate:
    """Lets a test hold a function inside its run (after its claim) until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.is_armed = True

    def hold(self) -> None:
        """Block the first caller (only) until release() is set."""
        if self.is_armed:
            self.is_armed = False
            self.entered.set()
            assert self.release.wait(WAIT), "the test never released the gate"


@dataclass
class Background:
    """A delivery running in another thread."""

    thread: threading.Thread
    gate: Gate

    def finish(self) -> None:
        self.gate.release.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


def rescue(app: App, clock: TestClock) -> None:
    """Let workers rescue deliveries whose worker died, and run their retries (whatever the
    delay the retry rules give a crashed attempt)."""
    app.drain()
    clock.advance(POLICY.first_delay)
    app.drain()


def deliver_in_background(app: App, name: str, event: Any, gate: Gate) -> Background:
    """Start one delivery in a thread and return once it is held inside its run."""
    thread = threading.Thread(target=deliver, args=(app, name, event, 1), daemon=True)
    thread.start()
    assert gate.entered.wait(WAIT), "the background delivery never started its run"
    return Background(thread, gate)


def count_orders(app: App) -> None:
    """Register `count_order`: bumps the order counter under tx.claim(event.id)."""

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def count_order(event: Event) -> None:
        with app.db.transaction() as tx:
            if not tx.claim(event.id):
                return
            tx.set(app.db.document("stats/orders"), {"n": Increment(1)}, merge=True)


@dataclass
class Charges:
    """A pretend payment API: what it charged, and what the function returned each run."""

    calls: list[str]
    results: list[Any]
    gate: Gate


def charge_function(
    app: App, *, key: Callable[[Event], Any] | None = None, ttl: float = 7 * 86400, **options: Any
) -> Charges:
    """Register `charge`: an @idempotent charge whose every return value is recorded."""
    charges = Charges([], [], Gate())
    charges.gate.is_armed = False
    spec: dict[str, Any] = {"lease": LEASE, "ttl": ttl}
    if key is not None:
        spec["key"] = key

    @idempotent(**spec)
    def charge_once(event: Event) -> str:
        charges.gate.hold()
        charges.calls.append(event.id)
        return f"ch_{len(charges.calls)}"

    @functools.wraps(charge_once)
    def charge(event: Event) -> Any:
        result = charge_once(event)
        charges.results.append(result)
        return result

    options.setdefault("retry_policy", POLICY)
    options.setdefault("timeout", LEASE)
    app.on_document_created("orders/{orderId}", name="charge", **options)(charge)
    return charges


T0 = 1_800_000_000.0


def message_event(event_id: str, amount: int) -> Event:
    """The event of a payment message, as `charge` sees it."""
    return Event(
        id=event_id,
        type="message.published",
        source="payments",
        time=to_datetime(T0),
        data=None,
        params={},
        attempt=1,
        size=0,
        function="charge",
        raw={"data": {"amount": amount}, "attributes": {}},
    )


RACERS = 8
