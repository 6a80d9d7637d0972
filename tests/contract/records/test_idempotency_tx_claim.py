"""tx.claim: true once per key, rolled back with its transaction.

Each test delivers the same event several times through the full attempt path (claim,
run, record), as a platform redelivering it would, and counts the side effects. A
delivery that must still be running while another arrives runs in a thread that blocks
on an Event; time moves only by `clock.advance`.
"""

from __future__ import annotations

from collections import Counter

import pytest

from oncefire import App, Increment, InvalidDocumentError, TransactionError
from oncefire.events import Event
from oncefire.testing import TestClock, deliver
from tests.contract.records.idempotency_support import (
    LEASE,
    POLICY,
    Boom,
    count_orders,
    counter,
    order_event,
)

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


# -- a claim kept as long as its event may come again -----------------------------------


def claiming(app: App, ttl: float, **options: object) -> None:
    """count_order: claims the event with this ttl, then counts the order."""

    @app.on_document_created("orders/{orderId}", timeout=LEASE, **options)
    def count_order(event: Event) -> None:
        with app.db.transaction() as tx:
            if tx.claim(event.id, ttl=ttl):
                tx.set(app.db.document("stats/orders"), {"n": Increment(1)}, merge=True)


def test_a_claim_forgotten_before_the_last_retry_is_refused(app: App) -> None:
    # POLICY retries for 60 + 120 + 240 = 420 s: a claim kept 10 s would be gone when a
    # retry (or a redelivery) of the event comes, which would then count the order again.
    claiming(app, ttl=10, retry_policy=POLICY)
    assert deliver(app, "count_order", order_event(), times=1)["failed"] == 1
    [attempt] = app.history.executions("count_order")
    assert "tx.claim(ttl=10) in 'count_order'" in (attempt.error or "")
    assert "at least 420 s" in (attempt.error or "")
    assert not app.db.document("stats/orders").get().exists  # refused before any write


def test_a_claim_kept_through_the_redelivery_window_is_taken(app: App) -> None:
    claiming(app, ttl=420, retry_policy=POLICY)
    assert deliver(app, "count_order", order_event(), times=2)["succeeded"] == 2
    assert counter(app) == 1


def test_without_retries_a_claim_is_kept_at_least_max_event_age(app: App) -> None:
    claiming(app, ttl=99, retry=False, max_event_age=100)
    assert deliver(app, "count_order", order_event(), times=1)["failed"] == 1
    assert "at least 100 s" in (app.history.executions("count_order")[0].error or "")


def test_a_claim_outside_a_function_takes_any_positive_ttl(app: App) -> None:
    claiming(app, ttl=420, retry_policy=POLICY)  # registered, but this claim is not its
    with app.db.transaction() as tx:
        assert tx.claim("k", ttl=1)
