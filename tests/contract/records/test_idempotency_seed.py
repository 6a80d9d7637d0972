"""The seed scenario, oncefire/demo/orders.py's charge, delivered twice and while it runs.

Each test delivers the same event several times through the full attempt path (claim,
run, record), as a platform redelivering it would, and counts the side effects. A
delivery that must still be running while another arrives runs in a thread that blocks
on an Event; time moves only by `clock.advance`.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.testing import TestClock, deliver
from tests.contract.records.idempotency_support import (
    Gate,
    deliver_in_background,
    order_event,
    outcomes,
)

# -- the seed scenario: oncefire/demo/orders.py --------------------------------------------------


def load_orders_example() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "src" / "oncefire" / "demo" / "orders.py"
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
