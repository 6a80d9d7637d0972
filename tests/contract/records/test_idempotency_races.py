"""Threads racing on one key make one side effect.

Each test delivers the same event several times through the full attempt path (claim,
run, record), as a platform redelivering it would, and counts the side effects. A
delivery that must still be running while another arrives runs in a thread that blocks
on an Event; time moves only by `clock.advance`.
"""

from __future__ import annotations

import threading
from typing import Any

from oncefire import App, Increment, idempotent
from oncefire.events import Event
from oncefire.testing import TestClock, deliver
from tests.contract.records.idempotency_support import (
    LEASE,
    POLICY,
    RACERS,
    WAIT,
    counter,
    order_event,
)

# -- races ------------------------------------------------------------------------------


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
