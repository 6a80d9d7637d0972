"""Idempotency on every store: tx.claim and @idempotent make one side effect per key.

Each test delivers the same event several times through the full attempt path (claim,
run, record), as a platform redelivering it would, and counts the side effects. A
delivery that must still be running while another arrives runs in a thread that blocks
on an Event; time moves only by `clock.advance`.
"""

from __future__ import annotations

import functools
import importlib.util
import sqlite3
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from oncefire import (
    App,
    ClaimHeldError,
    Increment,
    InvalidDocumentError,
    PayloadMismatchError,
    PermanentError,
    RetryPolicy,
    TransactionError,
    idempotent,
)
from oncefire.clock import to_datetime
from oncefire.events import Event
from oncefire.idempotency import IdempotencySpec, _acquire, _Claim, _finish, _release
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


def record_of(app: App, key: str, function: str = "charge") -> IdempotencyRecord | None:
    """The stored @idempotent record of a function's key."""
    return app.store.idempotency_record(f"{function}/{key}")


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


# -- tx.claim ---------------------------------------------------------------------------


def test_claim_is_true_once_and_false_after_it_committed(app: App) -> None:
    with app.db.transaction() as tx:
        assert tx.claim("k1") is True
    with app.db.transaction() as tx:
        assert tx.claim("k1") is False
        assert tx.claim("k2") is True


def test_claim_and_the_writes_of_its_transaction_roll_back_together(app: App) -> None:
    ref = app.db.document("stats/orders")
    with pytest.raises(Boom), app.db.transaction() as tx:
        assert tx.claim("k1")
        tx.set(ref, {"n": Increment(1)}, merge=True)
        raise Boom
    assert not ref.get().exists
    with app.db.transaction() as tx:
        assert tx.claim("k1"), "a rolled-back claim must not count as committed"
        tx.set(ref, {"n": Increment(1)}, merge=True)
    assert counter(app) == 1


def test_claim_rejects_an_empty_key_and_a_bad_ttl(app: App) -> None:
    with app.db.transaction() as tx:
        with pytest.raises(InvalidDocumentError):
            tx.claim("")
        for ttl in (0, -1, float("inf"), float("nan")):
            with pytest.raises(InvalidDocumentError, match="ttl"):
                tx.claim("k", ttl=ttl)


def test_claim_after_the_transaction_ended_is_refused(app: App) -> None:
    with app.db.transaction() as tx:
        pass
    with pytest.raises(TransactionError):
        tx.claim("k")


def count_orders(app: App) -> None:
    """Register `count_order`: bumps the order counter under tx.claim(event.id)."""

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def count_order(event: Event) -> None:
        with app.db.transaction() as tx:
            if not tx.claim(event.id):
                return
            tx.set(app.db.document("stats/orders"), {"n": Increment(1)}, merge=True)


def test_claim_makes_a_store_write_happen_once_however_often_the_event_comes(app: App) -> None:
    count_orders(app)
    event = order_event()
    summary = deliver(app, "count_order", event, times=3)
    assert summary["succeeded"] == 3
    assert counter(app) == 1
    assert app.stats()["count_order"].dedupe_hits == 2


def test_crash_before_commit_leaves_neither_the_claim_nor_the_write(
    app: App, clock: TestClock
) -> None:
    calls = Counter[str]()

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def count_order(event: Event) -> None:
        calls[event.id] += 1
        with app.db.transaction() as tx:
            if not tx.claim(event.id):
                return
            tx.set(app.db.document("stats/orders"), {"n": Increment(1)}, merge=True)
            if calls[event.id] == 1:
                raise Boom("the process died before commit")

    event = order_event()
    assert deliver(app, "count_order", event, times=1)["failed"] == 1
    assert not app.db.document("stats/orders").get().exists
    clock.advance(60)
    assert app.drain()["succeeded"] == 1
    assert counter(app) == 1
    assert app.stats()["count_order"].dedupe_hits == 0


# -- @idempotent ------------------------------------------------------------------------


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


def test_completed_key_returns_the_stored_result_and_does_not_run(app: App) -> None:
    charges = charge_function(app)
    event = order_event()
    assert deliver(app, "charge", event, times=3)["succeeded"] == 3
    assert charges.calls == [event.id]
    assert charges.results == ["ch_1", "ch_1", "ch_1"]
    assert app.stats()["charge"].dedupe_hits == 2


def test_different_keys_each_run_once(app: App) -> None:
    charges = charge_function(app)
    first, second = order_event("o1"), order_event("o2")
    deliver(app, "charge", first, times=2)
    deliver(app, "charge", second, times=2)
    assert charges.calls == [first.id, second.id]
    assert charges.results == ["ch_1", "ch_1", "ch_2", "ch_2"]


def test_two_functions_on_one_event_each_run_once_with_their_own_result(app: App) -> None:
    effects: list[str] = []
    results: dict[str, list[Any]] = {"charge": [], "email": []}

    @idempotent(lease=LEASE)
    def charge_once(event: Event) -> str:
        effects.append("charged")
        return "ch_1"

    @idempotent(lease=LEASE)
    def email_once(event: Event) -> str:
        effects.append("emailed")
        return "msg_1"

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def charge(event: Event) -> None:
        results["charge"].append(charge_once(event))

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def email(event: Event) -> None:
        results["email"].append(email_once(event))

    event = order_event()
    deliver(app, "charge", event, times=2)
    deliver(app, "email", event, times=2)
    assert effects == ["charged", "emailed"]
    assert results == {"charge": ["ch_1", "ch_1"], "email": ["msg_1", "msg_1"]}


def test_two_helpers_sharing_a_key_in_one_function_fail_loudly(app: App) -> None:
    effects: list[str] = []

    @idempotent(lease=LEASE)
    def charge_once(event: Event) -> str:
        effects.append("charged")
        return "ch_1"

    @idempotent(lease=LEASE)
    def email_once(event: Event) -> str:
        effects.append("emailed")
        return "msg_1"

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def on_order(event: Event) -> None:
        charge_once(event)
        email_once(event)  # the same key (event.id) in the same function

    event = order_event()
    assert deliver(app, "on_order", event, times=1)["permanent"] == 1
    assert effects == ["charged"], "email_once must not be handed charge_once's result"
    assert "another @idempotent function" in (app.dead_letters.list()[0].error or "")


def test_key_held_by_a_live_lease_is_a_transient_failure_retried_after_the_lease(
    app: App, clock: TestClock
) -> None:
    charges = charge_function(app)
    charges.gate.is_armed = True
    event = order_event()
    first = deliver_in_background(app, "charge", event, charges.gate)
    clock.advance(10)
    summary = deliver(app, "charge", event, times=1)
    assert summary["failed"] == 1
    errors = [a["error"] for a in app.store.attempts(event.id) if a["outcome"] == "failed"]
    assert "ClaimHeldError" in errors[0]
    first.finish()
    assert charges.calls == [event.id]
    # The retry is due when the holder's lease would end (20 s on), not on the backoff (60 s).
    clock.advance(19)
    assert app.drain().attempts == 0
    clock.advance(1)
    assert app.drain()["succeeded"] == 1
    assert charges.calls == [event.id]
    assert charges.results == ["ch_1", "ch_1"]
    assert app.stats()["charge"].dedupe_hits == 1


def test_held_key_is_retried_even_when_exceptions_are_listed_as_permanent(
    app: App, clock: TestClock
) -> None:
    charges = charge_function(app, permanent_errors=(Exception,))
    charges.gate.is_armed = True
    event = order_event()
    first = deliver_in_background(app, "charge", event, charges.gate)
    assert deliver(app, "charge", event, times=1)["failed"] == 1
    first.finish()
    assert app.dead_letters.count() == 0
    clock.advance(LEASE)
    assert app.drain()["succeeded"] == 1
    assert charges.results == ["ch_1", "ch_1"]


def test_expired_lease_is_taken_over_and_the_work_finished(app: App, clock: TestClock) -> None:
    charges = charge_function(app)
    charges.gate.is_armed = True
    event = order_event()
    holder = deliver_in_background(app, "charge", event, charges.gate)  # then its worker dies
    clock.advance(LEASE)  # both the delivery's lease and the claim's lease run out
    rescue(app, clock)
    assert outcomes(app, event.id, "charge") == ["crashed", "succeeded"]
    assert charges.calls == [event.id], "the taken-over key must run, not be skipped"
    assert charges.results == ["ch_1"]
    record = record_of(app, event.id)
    assert record is not None and record.status == "completed"
    holder.gate.is_armed = False
    holder.finish()


def test_stale_holder_that_completes_after_a_takeover_changes_nothing(
    app: App, clock: TestClock
) -> None:
    charges = charge_function(app)
    charges.gate.is_armed = True
    event = order_event()
    stale = deliver_in_background(app, "charge", event, charges.gate)
    clock.advance(LEASE)
    rescue(app, clock)  # the retry takes the key over and completes it: ch_1
    assert outcomes(app, event.id, "charge") == ["crashed", "succeeded"]
    taken_over = record_of(app, event.id)
    stale.finish()  # the paused holder wakes up, runs on and returns ch_2
    assert charges.results == ["ch_1", "ch_2"]
    assert record_of(app, event.id) == taken_over
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert charges.results[-1] == "ch_1", "a duplicate must see the owner's result"


def test_stale_holder_that_fails_after_a_takeover_releases_nothing(
    app: App, clock: TestClock
) -> None:
    calls: list[int] = []
    gate = Gate()

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE)
    def charge(event: Event) -> str:
        calls.append(1)
        number = len(calls)
        gate.hold()
        if number == 1:
            raise Boom("the paused holder fails late")
        return "ok"

    event = order_event()
    stale = deliver_in_background(app, "charge", event, gate)
    clock.advance(LEASE)
    rescue(app, clock)
    assert outcomes(app, event.id, "charge") == ["crashed", "succeeded"]
    stale.finish()
    record = record_of(app, event.id)
    assert record is not None and record.status == "completed"
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert len(calls) == 2


def test_stale_holder_that_fails_while_the_new_holder_runs_keeps_its_claim(
    app: App, clock: TestClock
) -> None:
    stale_gate, owner_gate = Gate(), Gate()
    calls: list[int] = []
    effects: list[int] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE)
    def charge(event: Event) -> str:
        calls.append(1)
        number = len(calls)
        if number == 1:
            stale_gate.hold()
            raise Boom("the paused holder fails late")
        if number == 2:
            owner_gate.hold()
        effects.append(number)
        return "ok"

    event = order_event()
    stale = deliver_in_background(app, "charge", event, stale_gate)
    clock.advance(LEASE)
    owner = deliver_in_background(app, "charge", event, owner_gate)  # takes the key over
    stale.finish()  # fails late: its release must not free the owner's claim
    assert deliver(app, "charge", event, times=1)["failed"] == 1, "the key is still held"
    owner.finish()
    assert effects == [2]
    clock.advance(LEASE + 60)
    app.drain()
    assert effects == [2]
    assert {state for _, state, _ in app.store.delivery_states(event.id)} == {"succeeded"}


def test_exception_releases_the_claim_at_once(app: App) -> None:
    fail = [True]
    calls: list[str] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE)
    def charge(event: Event) -> str:
        calls.append(event.id)
        if fail[0]:
            raise Boom("the gateway refused")
        return "ok"

    event = order_event()
    assert deliver(app, "charge", event, times=1)["failed"] == 1
    assert record_of(app, event.id) is None
    fail[0] = False
    # A redelivery right away (no time passes) runs: nothing holds the key.
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert calls == [event.id, event.id]


def test_same_key_with_another_payload_is_a_permanent_payload_mismatch(app: App) -> None:
    charges = charge_function(app, key=lambda e: e.data.get("order"))
    first = order_event("a", amount=500, order="order-7")
    second = order_event("b", amount=900, order="order-7")
    assert deliver(app, "charge", first, times=1)["succeeded"] == 1
    summary = deliver(app, "charge", second, times=1)
    assert summary["permanent"] == 1
    assert charges.calls == [first.id]
    assert charges.results == ["ch_1"], "another payload's stored result must never be returned"
    (letter,) = app.dead_letters.list()
    assert letter.event_id == second.id and letter.attempts == 1
    assert "PayloadMismatchError" in (letter.error or "")
    assert issubclass(PayloadMismatchError, PermanentError)
    assert app.stats()["charge"].dedupe_hits == 0


def test_same_payload_in_another_field_order_is_not_a_mismatch(app: App) -> None:
    charges = charge_function(app, key=lambda e: e.data.get("order"))
    first = make_event("document.created", "orders/a", {"order": "x", "amount": 5}, id="e-1")
    # The same document at the same time: only the order of the fields differs.
    again = make_event("document.created", "orders/a", {"amount": 5, "order": "x"}, id="e-1b")
    deliver(app, "charge", first, times=1)
    assert deliver(app, "charge", again, times=1)["succeeded"] == 1
    assert charges.calls == [first.id]


def test_empty_or_none_key_is_a_permanent_error(app: App) -> None:
    charges = charge_function(app, key=lambda e: e.data.get("order"))
    first, second = order_event("a"), order_event("b")
    assert deliver(app, "charge", first, times=1)["permanent"] == 1
    assert deliver(app, "charge", second, times=1)["permanent"] == 1
    assert charges.calls == [], "events without a key must not share the key 'None'"


def key_from_raw(event: Event) -> str:
    return str(event.raw["after"]["data"]["order"])


def mutate(event: Event) -> None:
    """What a careless function does: rewrite the payload it was given."""
    event.raw["after"]["data"]["order"] = "rewritten"
    event.raw["after"]["data"]["amount"] = 1


def test_a_function_that_mutates_its_event_changes_neither_key_nor_hash(app: App) -> None:
    calls: list[str] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE, key=key_from_raw)
    def charge(event: Event) -> str:
        calls.append(event.id)
        mutate(event)
        return "ok"

    event = order_event(order="order-7")
    assert deliver(app, "charge", event, times=2)["succeeded"] == 2
    assert calls == [event.id]
    assert record_of(app, "rewritten") is None
    record = record_of(app, "order-7")
    assert record is not None and record.status == "completed"


def test_a_function_that_mutates_its_event_then_fails_releases_its_own_key(app: App) -> None:
    calls: list[str] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE, key=key_from_raw)
    def charge(event: Event) -> str:
        calls.append(event.id)
        mutate(event)
        if len(calls) == 1:
            raise Boom
        return "ok"

    event = order_event(order="order-7")
    deliver(app, "charge", event, times=1)
    assert record_of(app, "order-7") is None
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert len(calls) == 2


def test_every_in_progress_claim_has_a_finite_expiry(app: App, clock: TestClock) -> None:
    charges = charge_function(app, ttl=3600)
    charges.gate.is_armed = True
    event = order_event()
    now = clock.now()
    holder = deliver_in_background(app, "charge", event, charges.gate)
    record = record_of(app, event.id)
    assert record is not None and record.status == "in_progress"
    assert record.lease_until == now + LEASE
    assert record.expires_at == now + 3600
    clock.advance(3600)  # the holder died and no retry came: the sweep still removes it
    from oncefire import ttl

    assert ttl.sweep(app) == 1
    assert record_of(app, event.id) is None
    holder.gate.is_armed = False
    holder.finish()


def test_async_function_runs_once(app: App) -> None:
    calls: list[str] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE)
    async def charge(event: Event) -> str:
        calls.append(event.id)
        return "ok"

    event = order_event()
    assert deliver(app, "charge", event, times=2)["succeeded"] == 2
    assert calls == [event.id]


def test_async_function_that_raises_releases_the_claim(app: App) -> None:
    calls: list[str] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE)
    async def charge(event: Event) -> str:
        calls.append(event.id)
        if len(calls) == 1:
            raise Boom
        return "ok"

    event = order_event()
    deliver(app, "charge", event, times=1)
    assert record_of(app, event.id) is None
    assert deliver(app, "charge", event, times=2)["succeeded"] == 2
    assert len(calls) == 2


def test_a_result_that_is_not_json_is_stored_as_null(app: App) -> None:
    calls: list[str] = []
    results: list[Any] = []

    @idempotent(lease=LEASE)
    def charge_once(event: Event) -> Any:
        calls.append(event.id)
        return {1, 2}

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def charge(event: Event) -> None:
        results.append(charge_once(event))

    event = order_event()
    assert deliver(app, "charge", event, times=2)["succeeded"] == 2
    assert calls == [event.id]
    assert results == [{1, 2}, None]


def test_idempotent_outside_a_trigger_is_refused() -> None:
    from oncefire import OncefireError

    @idempotent()
    def charge(event: Event) -> None:
        pass

    with pytest.raises(OncefireError, match="under an oncefire trigger"):
        charge(None)  # type: ignore[arg-type]


def test_dedupe_hits_are_counted_per_function_for_both_helpers(app: App) -> None:
    count_orders(app)
    charge_function(app, key=lambda e: e.data.get("order"))
    event = order_event(order="order-7")
    deliver(app, "count_order", event, times=3)
    deliver(app, "charge", event, times=2)
    deliver(app, "charge", order_event("b", amount=1, order="order-7"), times=1)  # mismatch
    stats = app.stats()
    assert stats["count_order"].dedupe_hits == 2
    assert stats["charge"].dedupe_hits == 1


# -- the store's @idempotent operations -------------------------------------------------

T0 = 1_800_000_000.0


def in_progress(token: str, now: float = T0, digest: str = "h1") -> IdempotencyRecord:
    """An in-progress record of key charge/k claimed at now under a LEASE-second lease."""
    return IdempotencyRecord(
        "charge/k", "charge", "in_progress", token, digest, now + LEASE, now + 100.0, None
    )


def test_store_claim_is_refused_while_a_record_lives_and_replaces_an_expired_one(
    app: App,
) -> None:
    store = app.store
    assert store.claim_idempotency(in_progress("t1"), T0)
    assert not store.claim_idempotency(in_progress("t2", digest="h2"), T0 + LEASE)
    assert store.idempotency_record("charge/k") == in_progress("t1")
    assert store.complete_idempotency("charge/k", "t1", T0 + 1, T0 + 50, '"r"')
    assert not store.claim_idempotency(in_progress("t3", T0 + 49), T0 + 49)
    # At its expiry a record is free, whatever its status or payload.
    assert store.claim_idempotency(in_progress("t4", T0 + 51, "h2"), T0 + 51)
    assert store.idempotency_record("charge/k") == in_progress("t4", T0 + 51, "h2")


def test_store_takeover_needs_the_stale_token_an_in_progress_record_and_a_run_out_lease(
    app: App,
) -> None:
    store = app.store
    store.claim_idempotency(in_progress("t1"), T0)
    assert not store.take_over_idempotency(in_progress("t2", T0 + 10), "t1", T0 + 10)
    assert not store.take_over_idempotency(in_progress("t2", T0 + LEASE), "t0", T0 + LEASE)
    assert store.take_over_idempotency(in_progress("t2", T0 + LEASE), "t1", T0 + LEASE)
    assert store.idempotency_record("charge/k") == in_progress("t2", T0 + LEASE)
    # A second takeover that read the same stale record finds it taken: one winner.
    assert not store.take_over_idempotency(in_progress("t3", T0 + LEASE), "t1", T0 + LEASE)
    # A completed record is never taken over, even with its own token and after its lease.
    assert store.complete_idempotency("charge/k", "t2", T0 + LEASE, T0 + 100, '"r"')
    assert not store.take_over_idempotency(in_progress("t4", T0 + 99), "t2", T0 + 99)
    assert store.idempotency_record("charge/k") == IdempotencyRecord(
        "charge/k", "charge", "completed", "t2", "h1", T0 + LEASE, T0 + 100, '"r"'
    )


def test_store_complete_and_release_change_only_the_record_their_token_holds(app: App) -> None:
    store = app.store
    store.claim_idempotency(in_progress("t1"), T0)
    assert not store.complete_idempotency("charge/k", "t0", T0 + 1, T0 + 50, '"stale"')
    assert not store.release_idempotency("charge/k", "t0")
    assert not store.complete_idempotency("charge/other", "t1", T0 + 1, T0 + 50, '"r"')
    assert store.idempotency_record("charge/k") == in_progress("t1")
    assert store.release_idempotency("charge/k", "t1")
    assert store.idempotency_record("charge/k") is None
    assert not store.release_idempotency("charge/k", "t1")
    store.claim_idempotency(in_progress("t2"), T0)
    assert store.complete_idempotency("charge/k", "t2", T0 + 1, T0 + 50, None)
    assert not store.release_idempotency("charge/k", "t2"), "a completed record stays"
    assert store.idempotency_record("charge/k") == IdempotencyRecord(
        "charge/k", "charge", "completed", "t2", "h1", T0 + 1, T0 + 50, None
    )


def test_sqlite_single_statement_writes_wait_for_a_busy_writer(sqlite_url: str) -> None:
    app = App(sqlite_url, clock=TestClock())
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), check_same_thread=False)
    other.isolation_level = None
    app.store.idempotency_record("charge/k")  # this thread's connection is open
    other.execute("BEGIN IMMEDIATE")
    # Held well past SQLite's own busy wait (20 ms) on the store's connections.
    commit = threading.Timer(0.2, other.execute, ("COMMIT",))
    commit.start()
    try:
        assert app.store.claim_idempotency(in_progress("t1"), T0)
        assert app.store.idempotency_record("charge/k") == in_progress("t1")
    finally:
        commit.join()
        app.close()
        other.close()


@contextmanager
def statements_of_this_thread(app: App) -> Iterator[list[str]]:
    """The SQL statements the store runs for the calling thread inside the block."""
    seen: list[str] = []
    if app.store.dialect == "sqlite":
        with app.store._conn() as conn:  # type: ignore[attr-defined]
            conn.set_trace_callback(seen.append)
            try:
                yield seen
            finally:
                conn.set_trace_callback(None)
        return
    import psycopg

    execute = psycopg.Cursor.execute
    me = threading.get_ident()

    def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == me:
            seen.append(str(query))
        return execute(cursor, query, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted)
        yield seen


def test_a_new_key_costs_one_statement_to_claim_and_one_to_complete(app: App) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    event = message_event("e1", amount=500)
    app.store.idempotency_record("charge/warm-up")  # the connection is open before counting
    with statements_of_this_thread(app) as claiming:
        claim = _acquire(app, spec, event)
    with statements_of_this_thread(app) as completing:
        _finish(app, spec, claim, "ok")
    assert [s.split()[0] for s in claiming] == ["INSERT"]
    assert [s.split()[0] for s in completing] == ["UPDATE"]
    second = _acquire(app, spec, event)
    assert second.is_done and second.result == "ok"
    with statements_of_this_thread(app) as releasing:
        _release(app, _acquire(app, spec, message_event("e2", amount=500)))
    assert [s.split()[0] for s in releasing] == ["INSERT", "DELETE"]


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


def test_holder_completing_between_a_duplicates_read_and_its_takeover_keeps_its_result(
    app: App, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    event = message_event("e1", amount=500)
    holder = _acquire(app, spec, event)
    clock.advance(LEASE)  # the holder stalls past its lease, then wakes up and completes
    read = app.store.idempotency_record

    def read_then_holder_completes(key: str) -> IdempotencyRecord | None:
        record = read(key)
        if record is not None and record.token == holder.token and record.status != "completed":
            _finish(app, spec, holder, "first")
        return record

    monkeypatch.setattr(app.store, "idempotency_record", read_then_holder_completes)
    duplicate = _acquire(app, spec, event)
    assert duplicate.is_done and duplicate.result == "first", "it must not take over"
    record = read("charge/e1")
    assert record is not None and (record.status, record.token) == ("completed", holder.token)


def race_takeovers_against_a_late_completion(
    app: App, spec: IdempotencySpec, holder: _Claim, event: Event
) -> list[str]:
    """RACERS duplicates of event claim its key while its stale holder completes, all at
    once; what each duplicate's claim returned."""
    barrier = threading.Barrier(RACERS + 1)
    got: list[str] = []
    lock = threading.Lock()

    def duplicate() -> None:
        barrier.wait(WAIT)
        try:
            claim = _acquire(app, spec, event)
        except ClaimHeldError:
            outcome = "held"
        else:
            outcome = f"done:{claim.result}" if claim.is_done else "claimed"
        with lock:
            got.append(outcome)

    def complete() -> None:
        barrier.wait(WAIT)
        _finish(app, spec, holder, "late")

    threads = [threading.Thread(target=duplicate) for _ in range(RACERS)]
    threads.append(threading.Thread(target=complete))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert len(got) == RACERS
    return got


def test_takeovers_racing_the_stale_holders_completion_leave_one_owner(
    app: App, clock: TestClock
) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    for n in range(5):
        event = message_event(f"e{n}", amount=500)
        holder = _acquire(app, spec, event)
        clock.advance(LEASE)
        got = race_takeovers_against_a_late_completion(app, spec, holder, event)
        record = app.store.idempotency_record(f"charge/{event.id}")
        assert record is not None
        if record.token == holder.token:  # the completion came first: every duplicate sees it
            assert record.status == "completed"
            assert got == ["done:late"] * RACERS
        else:  # one duplicate took the key over; the late completion was discarded
            assert record.status == "in_progress"
            assert sorted(got) == ["claimed"] + ["held"] * (RACERS - 1)


def test_a_key_that_changes_hands_throughout_a_claim_is_retried_later(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    # Each time: the claim meets a live record, which is released before it is read.
    monkeypatch.setattr(app.store, "claim_idempotency", lambda record, now: False)
    monkeypatch.setattr(app.store, "idempotency_record", lambda key: None)
    with pytest.raises(ClaimHeldError, match="changed hands 5 times") as caught:
        _acquire(app, spec, message_event("e1", amount=500))
    assert caught.value.delay is None  # retried on the backoff, not at a lease's end


# -- races ------------------------------------------------------------------------------

RACERS = 8


def test_eight_threads_racing_on_one_key_make_one_side_effect(app: App, clock: TestClock) -> None:
    barrier = threading.Barrier(RACERS)
    racing = [True]
    effects: list[int] = []
    lock = threading.Lock()

    def key(event: Event) -> str:
        if racing[0]:
            barrier.wait(WAIT)  # every delivery reaches its claim at the same moment
        return event.id

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE, key=key)
    def charge(event: Event) -> str:
        with lock:
            effects.append(threading.get_ident())
        return "ok"

    event = order_event()
    with app.store.transaction() as tx:
        tx.append(event, [], clock.now())
    summaries: list[Any] = []

    def run() -> None:
        summaries.append(deliver(app, "charge", event, times=1))

    threads = [threading.Thread(target=run) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    racing[0] = False
    assert len(summaries) == RACERS
    assert len(effects) == 1
    assert sum(s.attempts for s in summaries) == RACERS
    clock.advance(LEASE)
    app.drain()
    assert [state for _, state, _ in app.store.delivery_states(event.id)] == ["succeeded"] * 8
    assert len(effects) == 1


def test_eight_threads_racing_tx_claim_on_one_key_write_once(app: App) -> None:
    barrier = threading.Barrier(RACERS)
    winners: list[bool] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(WAIT)
            with app.db.transaction() as tx:
                is_new = tx.claim("order-7")
                if is_new:
                    tx.set(app.db.document("stats/orders"), {"n": Increment(1)}, merge=True)
            winners.append(is_new)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert errors == []
    assert sorted(winners) == [False] * 7 + [True]
    assert counter(app) == 1


# -- the seed scenario: examples/orders.py ----------------------------------------------


def load_orders_example() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "examples" / "orders.py"
    spec = importlib.util.spec_from_file_location("orders_example_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ORDERS = load_orders_example()


@dataclass
class Seed:
    """The example's charge function registered on a test app, with a recording gateway."""

    gateway_calls: list[tuple[str, int, str]]
    results: list[Any]
    gate: Gate


@pytest.fixture
def seed(app: App, monkeypatch: pytest.MonkeyPatch) -> Iterator[Seed]:
    state = Seed([], [], Gate())
    state.gate.is_armed = False

    def gateway(order_id: str, amount: int, idempotency_key: str) -> str:
        state.gate.hold()
        state.gateway_calls.append((order_id, amount, idempotency_key))
        return f"ch_{order_id}"

    monkeypatch.setattr(ORDERS, "app", app)
    monkeypatch.setattr(ORDERS, "payment_gateway", gateway)

    @functools.wraps(ORDERS.charge_on_order)
    def charge_on_order(event: Event) -> Any:
        result = ORDERS.charge_on_order(event)
        state.results.append(result)
        return result

    app.on_document_created(
        "orders/{orderId}", retry_policy=ORDERS.DEMO_POLICY, timeout=10, name="charge_on_order"
    )(charge_on_order)
    yield state


def test_seed_charge_delivered_twice_with_the_same_event_charges_once(app: App, seed: Seed) -> None:
    event = order_event("o1", amount=500)
    assert deliver(app, "charge_on_order", event, times=2)["succeeded"] == 2
    assert seed.gateway_calls == [("o1", 500, event.id)]
    assert seed.results == ["ch_o1", "ch_o1"]
    assert app.db.document("stats/orders").get().get("charged") == 1
    assert app.stats()["charge_on_order"].dedupe_hits == 1


def test_seed_charge_delivered_while_the_first_attempt_runs_is_retried_then_returns_the_result(
    app: App, clock: TestClock, seed: Seed
) -> None:
    seed.gate.is_armed = True
    event = order_event("o1", amount=500)
    first = deliver_in_background(app, "charge_on_order", event, seed.gate)
    assert deliver(app, "charge_on_order", event, times=1)["failed"] == 1
    assert app.drain().attempts == 0, "the retry waits for the holder's lease"
    first.finish()
    assert seed.gateway_calls == [("o1", 500, event.id)]
    clock.advance(30)  # the example's lease
    assert app.drain()["succeeded"] == 1
    assert seed.gateway_calls == [("o1", 500, event.id)]
    assert seed.results == ["ch_o1", "ch_o1"]
    assert app.db.document("stats/orders").get().get("charged") == 1
    assert outcomes(app, event.id, "charge_on_order") == ["succeeded", "failed", "succeeded"]
    assert app.stats()["charge_on_order"].dedupe_hits == 1


# -- the state machine, as a model-based test (SQLite) ----------------------------------

KEYS = ("k1", "k2")  # few keys, so deliveries meet often
MODEL_LEASE, MODEL_TTL = 10.0, 100_000.0


class Crash(Exception):
    """The process died inside a transaction."""


@dataclass(frozen=True)
class InProgress:
    holder: int
    token: str
    variant: int
    lease_until: float


@dataclass(frozen=True)
class Done:
    variant: int
    token: str
    result: str


@dataclass(frozen=True)
class Holder:
    key: str
    claim: _Claim


class IdempotencyMachine(RuleBasedStateMachine):
    """Claims, completions, failures, crashes, lease expiry and duplicates in any order.

    The model predicts what each claim must return; the store's records must match it, and
    no key may have two side effects. A side effect is made by `complete`, by the holder
    that owns the key. A holder that lost its key (taken over after its lease ran out) can
    only write late (`late_write`): the runtime's lease >= timeout rule means its run is
    over, and its late completion or release must change nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.clock = TestClock()
        self.app = App(f"sqlite:///{self.directory.name}/machine.db", clock=self.clock)
        self.spec = IdempotencySpec(MODEL_LEASE, MODEL_TTL, lambda e: e.id, "charge")
        self.records: dict[str, InProgress | Done] = {}
        self.holders: dict[int, Holder] = {}
        self.effects = Counter[str]()
        self.touched: set[str] = set()
        self.committed: set[str] = set()
        self.next_holder = 0

    def event(self, key: str, variant: int) -> Event:
        return Event(
            id=key,
            type="message.published",
            source="payments",
            time=to_datetime(self.clock.now()),
            data=None,
            params={},
            attempt=1,
            size=0,
            function="charge",
            raw={"data": {"amount": 500 + variant}, "attributes": {}},
        )

    def expected(self, key: str, variant: int) -> str:
        record = self.records.get(key)
        if record is None:
            return "claimed"
        if record.variant != variant:
            return "mismatch"
        if isinstance(record, Done):
            return "done"
        if record.lease_until > self.clock.now():
            return "held"
        return "claimed"  # taken over

    def owns(self, holder: int) -> bool:
        record = self.records.get(self.holders[holder].key)
        return isinstance(record, InProgress) and record.holder == holder

    @rule(key=st.sampled_from(KEYS))
    def deliver(self, key: str) -> None:
        """A delivery of the key's event reaches its claim (a duplicate, or a first)."""
        self.claim(key, 0)

    @rule(key=st.sampled_from(KEYS))
    def deliver_another_payload(self, key: str) -> None:
        """Another event that uses the same key reaches its claim."""
        self.claim(key, 1)

    def claim(self, key: str, variant: int) -> None:
        self.touched.add(key)
        want = self.expected(key, variant)
        try:
            claim = _acquire(self.app, self.spec, self.event(key, variant))
        except ClaimHeldError:
            got = "held"
        except PayloadMismatchError:
            got = "mismatch"
        else:
            got = "done" if claim.is_done else "claimed"
        assert got == want
        if got == "done":
            record = self.records[key]
            assert isinstance(record, Done) and claim.result == record.result
        elif got == "claimed":
            holder, self.next_holder = self.next_holder, self.next_holder + 1
            self.holders[holder] = Holder(key, claim)
            self.records[key] = InProgress(
                holder, claim.token, variant, self.clock.now() + MODEL_LEASE
            )

    @precondition(lambda self: any(self.owns(h) for h in self.holders))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        """The owner makes its side effect and records its result."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if self.owns(h))))
        owner = self.holders.pop(holder)
        self.effects[owner.key] += 1
        result = f"r{holder}"
        _finish(self.app, self.spec, owner.claim, result)
        record = self.records[owner.key]
        self.records[owner.key] = Done(record.variant, owner.claim.token, result)

    @precondition(lambda self: any(self.owns(h) for h in self.holders))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        """The owner's run raised: its claim is released."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if self.owns(h))))
        owner = self.holders.pop(holder)
        _release(self.app, owner.claim)
        del self.records[owner.key]

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """A holder's process dies: nothing is written, its lease runs out in time."""
        del self.holders[data.draw(st.sampled_from(sorted(self.holders)))]

    @precondition(lambda self: any(not self.owns(h) for h in self.holders))
    @rule(data=st.data(), is_completion=st.booleans())
    def late_write(self, data: st.DataObject, is_completion: bool) -> None:
        """A holder that lost its key writes late: nothing changes."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if not self.owns(h))))
        stale = self.holders.pop(holder)
        before = record_of(self.app, stale.key)
        if is_completion:
            _finish(self.app, self.spec, stale.claim, "stale")
        else:
            _release(self.app, stale.claim)
        assert record_of(self.app, stale.key) == before

    @rule(seconds=st.sampled_from((4.0, 11.0)))
    def advance(self, seconds: float) -> None:
        """Time passes; leases run out."""
        self.clock.advance(seconds)

    @precondition(
        lambda self: any(
            isinstance(r, InProgress) and r.lease_until > self.clock.now()
            for r in self.records.values()
        )
    )
    @rule(data=st.data())
    def lease_runs_out(self, data: st.DataObject) -> None:
        """Time reaches the exact end of a held key's lease: from then on it can be taken."""
        ends = sorted(
            r.lease_until
            for r in self.records.values()
            if isinstance(r, InProgress) and r.lease_until > self.clock.now()
        )
        self.clock.advance(data.draw(st.sampled_from(ends)) - self.clock.now())

    @precondition(lambda self: any(self.owns(h) for h in self.holders))
    @rule(data=st.data())
    def take_over(self, data: st.DataObject) -> None:
        """A holder stalls past its lease and a duplicate takes its key over."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if self.owns(h))))
        record = self.records[self.holders[holder].key]
        assert isinstance(record, InProgress)
        self.clock.advance(max(0.0, record.lease_until - self.clock.now()))
        self.claim(self.holders[holder].key, record.variant)
        assert not self.owns(holder)

    @rule(key=st.sampled_from(("c1", "c2")), is_crash=st.booleans())
    def tx_claim(self, key: str, is_crash: bool) -> None:
        """A store side effect under tx.claim; a crash before commit rolls both back."""
        db = self.app.db
        is_new = False
        try:
            with db.transaction() as tx:
                is_new = tx.claim(key, ttl=MODEL_TTL)
                assert is_new == (key not in self.committed)
                if is_new:
                    tx.set(db.document(f"counters/{key}"), {"n": Increment(1)}, merge=True)
                if is_crash:
                    raise Crash
        except Crash:
            return
        if is_new:
            self.committed.add(key)

    @invariant()
    def one_side_effect_per_key(self) -> None:
        assert all(n <= 1 for n in self.effects.values()), self.effects
        for key in ("c1", "c2"):
            stored = self.app.db.document(f"counters/{key}").get().get("n")
            assert stored == (1 if key in self.committed else None)

    @invariant()
    def records_match_the_model(self) -> None:
        assert self.clock.now() < 1_800_000_000.0 + MODEL_TTL  # records never expire here
        for key in KEYS:
            stored = record_of(self.app, key)
            model = self.records.get(key)
            if model is None:
                assert stored is None
            elif isinstance(model, InProgress):
                assert stored is not None and stored.status == "in_progress"
                assert (stored.token, stored.lease_until) == (model.token, model.lease_until)
            else:
                assert stored is not None and stored.status == "completed"
                assert stored.token == model.token and stored.result_json == f'"{model.result}"'

    def teardown(self) -> None:
        try:
            # Liveness: once every lease has run out, each key's work is finished exactly once.
            self.holders.clear()
            self.clock.advance(MODEL_LEASE)
            for key in self.touched:
                record = self.records.get(key)
                variant = record.variant if record is not None else 0
                claim = _acquire(self.app, self.spec, self.event(key, variant))
                if not claim.is_done:
                    self.effects[key] += 1
                    _finish(self.app, self.spec, claim, "last")
            assert all(self.effects[key] == 1 for key in self.touched), self.effects
        finally:
            self.app.close()
            self.directory.cleanup()


TestIdempotencyStateMachine = IdempotencyMachine.TestCase
TestIdempotencyStateMachine.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
