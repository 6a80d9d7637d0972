"""A store taking orders: each new order is charged through a flaky payment gateway.

Run it with `oncefire demo`. The gateway times out for the first seconds, so charges are
retried on a short schedule and then succeed; one malformed order fails every time and
lands in the dead-letter queue. The charge is @idempotent (a redelivered event never
charges twice) and the order counter is bumped under a tx.claim (exactly once).
"""

from __future__ import annotations

import threading
import time

from oncefire import App, Increment, RetryPolicy, idempotent
from oncefire.events import Event

# Short delays so the whole story plays out in seconds: 1, 2 and 4 s between 4 attempts.
DEMO_POLICY = RetryPolicy(max_attempts=4, first_delay=1, multiplier=2)

app = App()
started = time.monotonic()
charged: dict[str, int] = {}  # gateway charges per idempotency key
events_of: dict[str, str] = {}  # order id -> the id of its created event


class GatewayTimeout(TimeoutError):
    """The payment gateway did not answer in time."""


def payment_gateway(order_id: str, amount: int, idempotency_key: str) -> str:
    """A pretend payment API that times out for the first 2.5 s after start-up."""
    if time.monotonic() - started < 2.5:
        time.sleep(0.2)
        raise GatewayTimeout("payment gateway timed out after 0.2 s")
    charged[idempotency_key] = charged.get(idempotency_key, 0) + 1
    return f"ch_{order_id}"


@app.on_document_created("orders/{orderId}", retry_policy=DEMO_POLICY, timeout=10)
@idempotent(lease=30, ttl=7 * 86400)
def charge_on_order(event: Event) -> str:
    """Charge a new order once, whatever the number of deliveries."""
    order = event.data.to_dict() or {}
    order_id = event.params["orderId"]
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


def main() -> None:
    """Write three orders, serve them until every delivery is settled, then report."""
    print(f"oncefire demo on {app.settings.store}\n")
    orders = app.db.collection("orders")
    orders.document("o1").set({"amount": 500, "item": "coffee beans"})
    orders.document("o2").set({"amount": 1200, "item": "grinder"})
    orders.document("o3").set({"item": "malformed: no amount"})
    print("wrote orders o1, o2 and o3; the gateway is down for the first 2.5 s\n")

    from oncefire.worker import Worker

    worker = Worker(app, concurrency=4)
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

    again = make_event("document.created", "orders/o1", id=events_of["o1"])
    deliver(app, "charge_on_order", again, times=2)
    print(
        f"\nredelivered o1's event twice more: the gateway charged it "
        f"{charged[events_of['o1']]} time(s) in all; @idempotent returned the stored charge"
    )

    print("\nstats (oncefire stats):")
    from oncefire.cli import print_stats

    print_stats(app.stats())
    counter = app.db.document("stats/orders").get().get("charged")
    print(f"\norders charged: {counter}; gateway charges per event: {sorted(charged.values())}")
    for letter in app.dead_letters.list():
        print(
            f"\ndead letter {letter.id}: {letter.function} on {letter.source} after "
            f"{letter.attempts} attempts"
        )
        print(f"  error: {(letter.error or '').splitlines()[0]}")
        print(
            f"  fix the order, then replay it:\n"
            f"    oncefire dlq replay {letter.id} --store {app.settings.store}"
        )
