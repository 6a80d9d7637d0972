"""The app of the PostgreSQL scale test (tests/e2e/test_postgres_scale.py).

Every document created under items/ starts `record_effect`, whose effect is one new document
under effects/ naming the event, written through tx.claim so that a redelivery adds nothing.
The store comes from ONCEFIRE_STORE (or --store); retries are quick, because during a database
restart an attempt fails with a store error and is simply tried again a moment later.
"""

from __future__ import annotations

from oncefire import App, RetryPolicy
from oncefire.events import Event

app = App()


@app.on_document_created(
    "items/{item}",
    retry_policy=RetryPolicy(max_attempts=30, first_delay=0.5, multiplier=2, max_delay=2),
)
def record_effect(event: Event) -> None:
    """Record this event's effect exactly once."""
    with app.db.transaction() as tx:
        if tx.claim(event.id):
            effect = app.db.collection("effects").document()
            tx.set(effect, {"event": event.id, "item": event.params["item"]})
