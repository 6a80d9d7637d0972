"""Deliveries and attempts: one delivery per event and function, every attempt recorded,
attempts counted when leased, and every transition guarded by state and lease token."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from oncefire import App, Increment, RetryPolicy
from oncefire.engine.execution import MAX_ERROR_CHARS
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.stores.base import Ending, Lease, Leased
from oncefire.testing import TestClock, deliver, make_event

LEASE = 30.0  # the default Settings.lease


def lease(app: App, worker: str = "w1", **kwargs: Any) -> list[Leased]:
    """Lease due deliveries directly from the store and mark them started, as a worker
    would."""
    now = app.clock.now()
    args: dict[str, Any] = {
        "worker": worker,
        "now": now,
        "lease_until": now + LEASE,
        "limit": 10,
        "functions": list(app.triggers),
        "caps": {},
    }
    args.update(kwargs)
    leased: list[Leased] = app.store.lease_due(**args)
    app.store.start([c.lease for c in leased], now)
    return leased


def rescue(app: App) -> int:
    """Record crashed attempts for run-out leases, as a worker's sweep does (and nothing else)."""
    return Worker(app.runtime).rescue()


def register_noop(app: App, **options: Any) -> list[Event]:
    seen: list[Event] = []

    @app.on_document_created("orders/{o}", **options)
    def charge(event: Event) -> None:
        seen.append(event)

    return seen


def test_a_leased_delivery_is_running_with_its_attempt_counted(app: App) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [leased] = lease(app)
    assert leased.attempt == 1
    assert leased.function == "charge"
    assert leased.event.source == "orders/o1"
    assert leased.event.data["after"]["data"] == {"n": 1}
    assert app.store.delivery_states(leased.event.id) == [("charge", "running", 1)]
    [attempt] = app.store.attempts(leased.event.id)
    assert attempt["outcome"] is None
    assert attempt["worker"] == "w1"
    assert attempt["started_at"] == app.clock.now()
    assert lease(app, worker="w2") == []  # a running delivery is not leased twice


def test_a_delivery_is_not_leased_before_it_is_due_nor_for_other_functions(app: App) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    assert lease(app, now=app.clock.now() - 0.001) == []
    assert lease(app, functions=["other"]) == []
    assert len(lease(app)) == 1


def test_complete_records_the_attempt_and_succeeds(app: App, clock: TestClock) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [leased] = lease(app)
    clock.advance(2.5)
    assert app.store.complete(leased.lease, Ending("succeeded", finished_at=clock.now()))
    assert app.store.delivery_states(leased.event.id) == [("charge", "succeeded", 1)]
    [attempt] = app.store.attempts(leased.event.id)
    assert attempt["outcome"] == "succeeded"
    assert attempt["finished_at"] - attempt["started_at"] == 2.5
    # a finished delivery takes no further transition
    result = Ending("failed", finished_at=clock.now(), error="late")
    assert not app.store.complete(leased.lease, result)
    assert not app.store.retry(leased.lease, result, clock.now())
    assert not app.store.bury(leased.lease, result, "late", None)
    assert app.store.delivery_states(leased.event.id) == [("charge", "succeeded", 1)]


def test_a_wrong_lease_token_changes_nothing(app: App, clock: TestClock) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [leased] = lease(app)
    forged = Lease(leased.lease.delivery_id, "not-the-token")
    result = Ending("succeeded", finished_at=clock.now())
    assert not app.store.complete(forged, result)
    assert not app.store.retry(forged, result, clock.now())
    assert not app.store.bury(forged, result, "x", None)
    assert app.store.renew([forged], clock.now(), clock.now() + LEASE) == []
    assert app.store.release([forged]) == 0
    assert app.store.delivery_states(leased.event.id) == [("charge", "running", 1)]
    assert app.store.complete(leased.lease, result)


def test_a_lease_is_not_rescued_before_it_runs_out(app: App, clock: TestClock) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [leased] = lease(app)
    clock.advance(LEASE - 0.001)
    assert app.drain().attempts == 0
    assert app.store.delivery_states(leased.event.id) == [("charge", "running", 1)]


def test_a_stale_writer_changes_nothing_after_its_lease_is_rescued(
    app: App, clock: TestClock
) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [stale] = lease(app)
    clock.advance(LEASE)
    assert rescue(app) == 1  # a crashed attempt; the delivery is due again at once
    event_id = stale.event.id
    assert app.store.delivery_states(event_id) == [("charge", "pending", 1)]
    late = Ending("succeeded", finished_at=clock.now())
    assert not app.store.complete(stale.lease, late)
    assert not app.store.retry(stale.lease, late, clock.now())
    assert not app.store.bury(stale.lease, late, "late", None)
    assert app.store.renew([stale.lease], clock.now(), clock.now() + LEASE) == []
    assert app.store.release([stale.lease]) == 0
    assert app.store.delivery_states(event_id) == [("charge", "pending", 1)]
    attempts = app.store.attempts(event_id)
    assert [a["outcome"] for a in attempts] == ["crashed"]
    assert "lease ran out" in attempts[0]["error"]


def test_an_expired_lease_can_be_leased_again_and_only_the_new_lease_counts(
    app: App, clock: TestClock
) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [stale] = lease(app, worker="w1")
    clock.advance(LEASE)
    assert rescue(app) == 1
    [fresh] = lease(app, worker="w2")
    assert fresh.lease.delivery_id == stale.lease.delivery_id
    assert fresh.lease.token != stale.lease.token
    assert fresh.attempt == 2
    assert not app.store.complete(
        stale.lease, Ending("failed", finished_at=clock.now(), error="old")
    )
    assert app.store.complete(fresh.lease, Ending("succeeded", finished_at=clock.now()))
    assert app.store.delivery_states(fresh.event.id) == [("charge", "succeeded", 2)]
    outcomes = [
        (a["number"], a["worker"], a["outcome"]) for a in app.store.attempts(fresh.event.id)
    ]
    assert outcomes == [(1, "w1", "crashed"), (2, "w2", "succeeded")]


def test_renew_extends_a_live_lease_only(app: App, clock: TestClock) -> None:
    register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [leased] = lease(app)
    clock.advance(LEASE - 1)
    assert app.store.renew([leased.lease], clock.now(), clock.now() + LEASE) == [leased.lease]
    clock.advance(LEASE - 1)  # past the first lease, within the renewed one
    assert app.drain().attempts == 0
    assert app.store.delivery_states(leased.event.id) == [("charge", "running", 1)]
    clock.advance(1)
    assert app.store.renew([leased.lease], clock.now(), clock.now() + LEASE) == []


def test_a_crash_is_counted_so_a_poison_event_reaches_the_dead_letter_queue(
    app: App, clock: TestClock
) -> None:
    register_noop(app, retry_policy=RetryPolicy(max_attempts=2))
    app.db.document("orders/o1").set({"n": 1})
    [first] = lease(app)
    clock.advance(LEASE)
    assert rescue(app) == 1
    [second] = lease(app)
    assert second.attempt == 2
    clock.advance(LEASE)
    assert rescue(app) == 1
    assert app.store.delivery_states(first.event.id) == [("charge", "dead", 2)]
    [letter] = app.dead_letters.list()
    assert letter.attempts == 2
    assert "lease ran out" in (letter.error or "")


def test_release_hands_a_delivery_back_without_counting_the_attempt(
    app: App, clock: TestClock
) -> None:
    seen = register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [leased] = lease(app)
    assert app.store.release([leased.lease]) == 1
    assert app.store.delivery_states(leased.event.id) == [("charge", "pending", 0)]
    assert app.store.attempts(leased.event.id) == []
    app.drain()
    assert [e.attempt for e in seen] == [1]


def test_a_delivery_handed_back_with_a_run_at_is_not_due_before_it(
    app: App, clock: TestClock
) -> None:
    seen = register_noop(app)
    app.db.document("orders/o1").set({"n": 1})
    [leased] = lease(app)
    assert app.store.release([leased.lease], is_solo=True, run_at=clock.now() + 10) == 1
    assert app.store.delivery_states(leased.event.id) == [("charge", "pending", 0)]
    assert app.drain().attempts == 0
    clock.advance(10)
    app.drain()
    assert [e.attempt for e in seen] == [1]


def test_every_attempt_is_recorded_with_its_outcome_and_duration(
    app: App, clock: TestClock
) -> None:
    ids: list[str] = []

    @app.on_document_created("orders/{o}")
    def charge(event: Event) -> None:
        ids.append(event.id)
        clock.advance(1.5)
        if len(ids) == 1:
            raise ValueError("card declined")

    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(60)
    app.drain()
    attempts = app.store.attempts(ids[0])
    assert [(a["number"], a["outcome"]) for a in attempts] == [(1, "failed"), (2, "succeeded")]
    assert all(a["finished_at"] - a["started_at"] == 1.5 for a in attempts)
    assert attempts[0]["error"].startswith("ValueError: card declined")
    assert 'raise ValueError("card declined")' in attempts[0]["error"]  # where it was raised
    assert attempts[1]["error"] is None


def test_error_text_names_the_exception_type_and_is_capped(app: App) -> None:
    ids: list[str] = []

    @app.on_document_created("orders/{o}", retry=False)
    def charge(event: Event) -> None:
        ids.append(event.id)
        raise KeyError("x" * (3 * MAX_ERROR_CHARS))

    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    [attempt] = app.store.attempts(ids[0])
    assert attempt["error"].startswith("KeyError: ")
    assert len(attempt["error"]) <= MAX_ERROR_CHARS
    [letter] = app.dead_letters.list()
    assert letter.error is not None and len(letter.error) <= MAX_ERROR_CHARS


def test_a_sync_attempt_past_its_timeout_is_a_timeout_and_its_late_result_is_discarded(
    app: App,
) -> None:
    ids: list[str] = []

    @app.on_document_created("orders/{o}", timeout=0.2)
    def slow(event: Event) -> None:
        ids.append(event.id)
        time.sleep(0.9)

    app.db.document("orders/o1").set({"n": 1})
    summary = app.drain()
    assert summary["timeout"] == 1
    assert summary["succeeded"] == 0
    assert app.store.delivery_states(ids[0]) == [("slow", "pending", 1)]
    [attempt] = app.store.attempts(ids[0])
    assert attempt["outcome"] == "timeout"
    assert "timed out after 0.2 s" in attempt["error"]


def test_an_async_attempt_past_its_timeout_is_cancelled_and_recorded_as_timeout(
    app: App,
) -> None:
    ids: list[str] = []
    cancelled: list[bool] = []

    @app.on_document_created("orders/{o}", timeout=0.2)
    async def slow(event: Event) -> None:
        ids.append(event.id)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)  # cancelled at its timeout, not waited for
            raise

    app.db.document("orders/o1").set({"n": 1})
    assert app.drain()["timeout"] == 1
    assert cancelled == [True]
    assert [a["outcome"] for a in app.store.attempts(ids[0])] == ["timeout"]
    assert app.store.delivery_states(ids[0]) == [("slow", "pending", 1)]


def test_a_timeout_error_raised_by_the_function_is_a_plain_failure(app: App) -> None:
    ids: list[str] = []

    @app.on_document_created("orders/{o}")
    async def gateway(event: Event) -> None:
        ids.append(event.id)
        raise TimeoutError("gateway did not answer")

    app.db.document("orders/o1").set({"n": 1})
    assert app.drain()["failed"] == 1
    [attempt] = app.store.attempts(ids[0])
    assert attempt["outcome"] == "failed"
    assert attempt["error"].startswith("TimeoutError: gateway did not answer")


def test_duplicate_delivery_runs_the_function_again_and_tx_claim_keeps_one_effect(
    app: App,
) -> None:
    runs: list[tuple[str, int]] = []

    @app.on_document_created("orders/{o}")
    def count_order(event: Event) -> None:
        runs.append((event.id, event.attempt))
        with app.db.transaction() as tx:
            if tx.claim(f"count:{event.id}"):
                tx.set(app.db.document("stats/orders"), {"n": Increment(1)}, merge=True)

    event = make_event("document.created", "orders/o1", {"n": 1})
    summary = deliver(app, "count_order", event, times=3)
    assert summary["succeeded"] == 3
    assert runs == [(event.id, 1)] * 3
    assert app.db.document("stats/orders").get().get("n") == 1
    states = app.store.delivery_states(event.id)
    assert states == [("count_order", "succeeded", 1)] * 3


def test_a_lease_respects_max_instances_without_starving_other_functions(
    app: App, clock: TestClock
) -> None:
    @app.on_document_created("bulk/{b}", max_instances=2)
    def bulk(event: Event) -> None: ...

    @app.on_document_created("orders/{o}")
    def charge(event: Event) -> None: ...

    with app.db.transaction() as tx:
        for n in range(60):
            tx.set(app.db.document(f"bulk/b{n}"), {"n": n})
    clock.advance(1)
    app.db.document("orders/o1").set({"n": 1})
    caps = {"bulk": 2}
    first = lease(app, limit=8, caps=caps)
    assert sorted(c.function for c in first) == ["bulk", "bulk", "charge"]
    assert lease(app, limit=8, caps=caps) == []  # bulk is at its cap
    bulk_lease = next(c.lease for c in first if c.function == "bulk")
    assert app.store.complete(bulk_lease, Ending("succeeded", finished_at=clock.now()))
    assert [c.function for c in lease(app, limit=8, caps=caps)] == ["bulk"]
    clock.advance(LEASE)  # running deliveries whose lease ran out do not hold a slot
    assert [c.function for c in lease(app, limit=8, caps=caps)] == ["bulk", "bulk"]


def test_a_lease_takes_the_oldest_due_deliveries_first_up_to_the_limit(
    app: App, clock: TestClock
) -> None:
    register_noop(app)
    for n in range(5):
        app.db.document(f"orders/o{n}").set({"n": n})
        clock.advance(1)
    leased = lease(app, limit=3)
    assert [c.event.source for c in leased] == ["orders/o0", "orders/o1", "orders/o2"]
    assert [c.event.source for c in lease(app, limit=3)] == ["orders/o3", "orders/o4"]
