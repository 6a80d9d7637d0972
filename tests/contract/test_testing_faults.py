"""oncefire.testing's faults, through their public names: fail_store_calls (the next store
calls of a kind fail) and crash_after_effect (a worker dies after the function's effect), and
what the idempotency helpers make of them."""

from __future__ import annotations

from typing import Any, cast

import pytest

from oncefire import App, ConfigError, Increment, idempotent
from oncefire.errors import StoreUnavailableError
from oncefire.events import Event
from oncefire.testing import STORE_CALLS, TestClock, crash_after_effect, fail_store_calls

PAST_THE_LEASES = 120  # the worker's lease (30 s) and an @idempotent record's (60 s + 10 s)


class Gateway:
    """A payment API that, like Stripe's, returns the first charge for a repeated key."""

    def __init__(self) -> None:
        self.calls: list[str | None] = []
        self.charges: dict[str, str] = {}

    def charge(self, amount: int, idempotency_key: str | None = None) -> str:
        self.calls.append(idempotency_key)
        if idempotency_key is None:
            idempotency_key = f"anonymous-{len(self.calls)}"
        return self.charges.setdefault(idempotency_key, f"ch_{len(self.charges) + 1}")


def test_idempotent_charges_once_when_the_worker_dies_after_the_charge(
    app: App, clock: TestClock
) -> None:
    gateway = Gateway()

    @app.on_document_created("orders/{o}", max_instances=4)
    @idempotent()
    def charge_on_order(event: Event) -> str:
        return gateway.charge(event.data.get("amount"), idempotency_key=event.id)

    app.db.document("orders/o1").set({"amount": 500})
    with crash_after_effect(app, "charge_on_order") as crashed:
        assert app.drain().attempts == 0  # it charged, and its worker died: nothing written
    assert crashed.count == 1 and len(gateway.calls) == 1
    clock.advance(PAST_THE_LEASES)
    summary = app.drain()  # rescued (crashed), the key taken over, run again
    assert (summary["crashed"], summary["succeeded"]) == (1, 1)
    assert len(gateway.calls) == 2  # the window @idempotent alone cannot close
    assert list(gateway.charges.values()) == ["ch_1"]  # the API's key closes it: one charge


def test_a_claimed_increment_counts_once_when_the_worker_dies_after_its_commit(
    app: App, clock: TestClock
) -> None:
    runs: list[str] = []

    @app.on_document_created("orders/{o}", max_instances=4)
    def count_order(event: Event) -> None:
        runs.append(event.id)
        with app.db.transaction() as tx:
            if not tx.claim(f"count_order:{event.id}"):
                return
            tx.set(app.db.document("stats/orders"), {"count": Increment(1)}, merge=True)

    app.db.document("orders/o1").set({"amount": 500})
    with crash_after_effect(app, "count_order"):
        app.drain()
    clock.advance(PAST_THE_LEASES)
    app.drain()
    assert len(runs) == 2  # delivered again
    assert app.db.document("stats/orders").get().to_dict() == {"count": 1}
    assert app.stats()["count_order"].dedupe_hits == 1


def test_an_unclaimed_increment_counts_twice_when_the_worker_dies(
    app: App, clock: TestClock
) -> None:
    @app.on_document_created("orders/{o}", max_instances=4)
    def count_order(event: Event) -> None:
        app.db.document("stats/orders").set({"count": Increment(1)}, merge=True)

    app.db.document("orders/o1").set({"amount": 500})
    with crash_after_effect(app, "count_order"):
        app.drain()
    clock.advance(PAST_THE_LEASES)
    app.drain()
    assert app.db.document("stats/orders").get().to_dict() == {"count": 2}  # the bug it shows


def test_only_the_next_attempts_of_the_named_function_crash(app: App, clock: TestClock) -> None:
    ran: list[str] = []
    app.on_document_created("orders/{o}", name="ship")(lambda event: ran.append("ship"))
    app.on_document_created("orders/{o}", name="bill")(lambda event: ran.append("bill"))
    for n in range(3):
        app.db.document(f"orders/o{n}").set({"n": n})
    with crash_after_effect(app, "ship", times=2) as crashed:
        summary = app.drain()
    assert crashed.count == 2
    assert (ran.count("ship"), ran.count("bill")) == (3, 3)
    assert (summary["succeeded"], app.stats()["ship"].running) == (4, 2)


def test_a_failed_write_rolls_back_and_the_retry_writes_it_once(app: App, clock: TestClock) -> None:
    @app.on_document_created("orders/{o}", max_instances=4)
    def ship(event: Event) -> None:
        with app.db.transaction() as tx:
            tx.set(app.db.document(f"shipments/{event.params['o']}"), {"order": event.id})

    app.db.document("orders/o1").set({"amount": 500})
    with fail_store_calls(app, "write") as faults:
        assert app.drain()["failed"] == 1
    assert faults.failed == 1
    assert not app.db.document("shipments/o1").get().exists  # failed at commit: rolled back
    clock.advance(60)  # the retry policy's first delay
    assert app.drain()["succeeded"] == 1
    assert app.db.document("shipments/o1").get().exists


def test_each_kind_of_store_call_fails_only_as_often_as_asked(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"n": 1})
    with fail_store_calls(app, "read", times=2, error=ConnectionError) as faults:
        for _ in range(2):
            with pytest.raises(ConnectionError, match="fail_store_calls 'read'"):
                ref.get()
        assert ref.get().exists  # the third read runs
    assert faults.failed == 2
    gone = StoreUnavailableError("the disk is gone")
    with fail_store_calls(app, "write", error=gone), pytest.raises(StoreUnavailableError) as got:
        ref.set({"n": 2})
    assert str(got.value) == "the disk is gone"
    assert ref.get().to_dict() == {"n": 1}
    app.on_document_created("parcels/{p}", name="ship")(lambda event: None)
    app.db.document("parcels/p1").set({"n": 2})
    with fail_store_calls(app, "lease"), pytest.raises(StoreUnavailableError):
        app.drain()
    assert app.drain()["succeeded"] == 1  # the block ended: the store answers again
    for names in STORE_CALLS.values():
        assert not set(names) & set(vars(app.store))  # nothing of the faults is left


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda app: fail_store_calls(app, "delete"), "No store call kind 'delete'"),
        (lambda app: fail_store_calls(app, "read", times=0), "times=0"),
        (lambda app: fail_store_calls(app, "read", error=cast(Any, "boom")), "error='boom'"),
        (lambda app: crash_after_effect(app, "nope"), "No function named 'nope'"),
        (lambda app: crash_after_effect(app, "ship", times=-1), "times=-1"),
    ],
)
def test_a_fault_asked_for_wrongly_is_refused_in_one_line(
    app: App, call: Any, message: str
) -> None:
    app.on_document_created("orders/{o}", name="ship")(lambda event: None)
    with pytest.raises(ConfigError, match=message), call(app):
        pass
