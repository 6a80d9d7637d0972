"""A store taking orders: each new order is charged through a flaky payment gateway.

Run it with `oncefire demo` (or `oncefire demo --store URL`, as often as you like: each run
writes new orders). The gateway times out for the first seconds, so charges are retried on a
short schedule and then succeed; one malformed order fails every time and lands in the
dead-letter queue. The charge is @idempotent (a redelivered event never charges twice) and
the order counter is bumped under a tx.claim (exactly once).

The function reads the order as it is now, not the snapshot in the event: so after a person
fixes a malformed order, replaying its dead letter charges the fixed order.
"""

from __future__ import annotations

import threading
import time

from oncefire import App, Increment, RetryPolicy, idempotent
from oncefire.events import Event
from oncefire.features.stats import stats_table

# Short delays so the whole story plays out in seconds: 1, 2 and 4 s between 4 attempts.
DEMO_POLICY = RetryPolicy(max_attempts=4, first_delay=1, multiplier=2)

app = App()
gateway_down_until = 0.0  # main() takes the gateway down for its first 2.5 s
charged: dict[str, int] = {}  # gateway charges per idempotency key
events_of: dict[str, str] = {}  # order id -> the id of its created event


class GatewayTimeout(TimeoutError):
    """The payment gateway did not answer in time."""


def payment_gateway(order_id: str, amount: int, idempotency_key: str) -> str:
    """A pretend payment API that times out for the first 2.5 s of the demo."""
    if time.monotonic() < gateway_down_until:
        time.sleep(0.2)
        raise GatewayTimeout("payment gateway timed out after 0.2 s")
    charged[idempotency_key] = charged.get(idempotency_key, 0) + 1
    return f"ch_{order_id}"


@app.on_document_created("orders/{orderId}", retry_policy=DEMO_POLICY, timeout=10)
@idempotent(lease=30, ttl=7 * 86400)
def charge_on_order(event: Event) -> str:
    """Charge a new order once, whatever the number of deliveries."""
    order_id = event.params["orderId"]
    # The order as it is now (a fix made after a failure is what a replay charges); the
    # event's snapshot only when no such order is stored (an event made by hand).
    current = app.db.document(f"orders/{order_id}").get()
    order = (current if current.exists else event.data).to_dict() or {}
    amount = order.get("amount")
    if not isinstance(amount, int) or amount <= 0:
        raise ValueError(f"order {order_id} has no valid amount: {amount!r}")
    print(f"    -> charging order {order_id}: {amount} cents (attempt {event.attempt})")
    events_of[order_id] = event.id
    charge_id = payment_gateway(order_id, amount, idempotency_key=event.id)
    with app.db.transaction() as tx:
        if tx.claim(f"count:{event.id}"):  # the counter moves once per order, exactly
            tx.set(app.db.document("stats/orders"), {"charged": Increment(1)}, merge=True)
    return charge_id


def write_orders() -> list[str]:
    """Write this run's three orders (new ids on every run, so a store can host many runs)."""
    with app.db.transaction() as tx:
        runs = app.db.document("demo/runs")
        run = int(tx.get(runs).get("count") or 0) + 1
        tx.set(runs, {"count": run})
    ids = [f"o{3 * run - 2}", f"o{3 * run - 1}", f"o{3 * run}"]
    orders = app.db.collection("orders")
    orders.document(ids[0]).set({"amount": 500, "item": "coffee beans"})
    orders.document(ids[1]).set({"amount": 1200, "item": "grinder"})
    orders.document(ids[2]).set({"item": "malformed: no amount"})
    return ids


def main() -> None:
    """Write three orders, serve them until every delivery is settled, then report."""
    global gateway_down_until
    print(f"oncefire demo on {app.settings.store}\n")
    before = app.db.document("stats/orders").get().get("charged") or 0
    gateway_down_until = time.monotonic() + 2.5
    ids = write_orders()
    print(f"wrote orders {ids[0]}, {ids[1]} and {ids[2]}; the gateway is down for 2.5 s\n")

    from oncefire.engine.worker import Worker

    worker = Worker(app.runtime, concurrency=4)
    thread = threading.Thread(target=worker.run, name="demo-worker")
    thread.start()
    try:
        while True:
            figures = app.stats()["charge_on_order"]
            if figures.pending == 0 and figures.running == 0:
                break
            time.sleep(0.2)
    finally:
        worker.stop_requested.set()
        thread.join()

    # At-least-once delivery means the same event can arrive again: show that it is harmless.
    from oncefire.testing import deliver, make_event

    again = make_event("document.created", f"orders/{ids[0]}", id=events_of[ids[0]])
    deliver(app, "charge_on_order", again, times=2)
    print(
        f"\nredelivered {ids[0]}'s event twice more: the gateway charged it "
        f"{charged[events_of[ids[0]]]} time(s) in all; @idempotent returned the stored charge"
    )

    print("\nstats (oncefire stats):")
    print(stats_table(app.stats()))
    total = app.db.document("stats/orders").get().get("charged") or 0
    print(
        f"\norders charged: {total - before} ({total} in all on this store); "
        f"gateway charges per event: {sorted(charged.values())}"
    )
    store = app.settings.store
    for letter in app.dead_letters.list():
        if letter.source != f"orders/{ids[2]}":
            continue
        print(
            f"\ndead letter {letter.id}: {letter.function} on {letter.source} after "
            f"{letter.attempts} attempts"
        )
        print(f"  error: {(letter.error or '').splitlines()[0]}")
        print(
            "  fix the order, then replay it (the function reads the order as it is now):\n"
            f"    oncefire doc set {letter.source} '{{\"amount\": 700}}' --merge --store {store}\n"
            f"    oncefire dlq replay {letter.id} --store {store}\n"
            f"    oncefire drain oncefire.demo.orders:app --store {store}"
        )
