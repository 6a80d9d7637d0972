"""@idempotent: one run per key, its result stored and returned, keys and payloads checked.

Each test delivers the same event several times through the full attempt path (claim,
run, record), as a platform redelivering it would, and counts the side effects. A
delivery that must still be running while another arrives runs in a thread that blocks
on an Event; time moves only by `clock.advance`.
"""

from __future__ import annotations

from typing import Any

import pytest

from oncefire import App, PayloadMismatchError, PermanentError, idempotent
from oncefire.events import Event
from oncefire.testing import TestClock, deliver, make_event
from tests.contract.records.idempotency_support import (
    LEASE,
    POLICY,
    Boom,
    charge_function,
    count_orders,
    deliver_in_background,
    order_event,
    record_of,
)

# -- @idempotent ------------------------------------------------------------------------


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


def test_two_helpers_with_the_default_key_in_one_function_each_run_once(app: App) -> None:
    # Issue 11, point 16: their records collided (PayloadMismatchError after the charge).
    effects: list[str] = []

    @idempotent(lease=LEASE)
    def charge_once(event: Event) -> str:
        effects.append("charged")
        return "ch_1"

    @idempotent(lease=LEASE)
    def email_once(event: Event) -> str:
        effects.append("emailed")
        return "msg_1"

    results: list[tuple[str, str]] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def on_order(event: Event) -> None:
        results.append((charge_once(event), email_once(event)))  # both keyed by event.id

    event = order_event()
    assert deliver(app, "on_order", event, times=3)["succeeded"] == 3
    assert effects == ["charged", "emailed"]
    assert results == [("ch_1", "msg_1")] * 3
    assert app.dead_letters.count() == 0
    assert record_of(app, event.id, "on_order", "charge_once") is not None
    assert record_of(app, event.id, "on_order", "email_once") is not None


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


def test_a_key_with_nul_is_a_permanent_error_on_every_store(app: App) -> None:
    # SQLite compared such keys wrongly (a take-over) and PostgreSQL refused them: both now
    # park the delivery, saying why.
    charges = charge_function(app, key=lambda e: f"order\x00{e.data.get('order')}")
    assert deliver(app, "charge", order_event("a"), times=1)["permanent"] == 1
    assert charges.calls == []
    [letter] = app.dead_letters.list()
    assert "without NUL characters" in (letter.error or ""), letter.error


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
    from oncefire.features import ttl

    assert ttl.sweep(app.runtime) == 1
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
