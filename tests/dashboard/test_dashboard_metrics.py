"""/metrics after a known workload: every figure exact, parsed as Prometheus reads it."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from oncefire import idempotent
from oncefire.dashboard import create_app
from oncefire.testing import TestClock, deliver, make_event
from tests.dashboard_shop import build

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


@pytest.mark.postgres_smoke
def test_metrics_count_a_known_workload_exactly(store_url: str, clock: TestClock) -> None:
    shop = build(store_url, clock)
    try:
        shop.succeed(2)
        shop.fail(3)
        shop.app.db.document("orders/o1").set({"n": 1})
        shop.app.db.document("orders/o2").set({"n": 2})
        clock.advance(30)
        response = TestClient(create_app(shop.app, allowed_hosts=["testserver"])).get("/metrics")
    finally:
        shop.app.close()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    got = scrape(response.text)
    w = ("window", "3600")
    assert got[("oncefire_attempts", (("function", "charge"), ("outcome", "succeeded"), w))] == 2
    assert got[("oncefire_attempts", (("function", "charge"), ("outcome", "failed"), w))] == 3
    assert got[("oncefire_dead_letters", (("function", "charge"),))] == 3
    assert got[("oncefire_dead_letters", (("function", "ship"),))] == 0
    assert got[("oncefire_deliveries", (("function", "charge"), ("state", "dead")))] == 3
    assert got[("oncefire_deliveries", (("function", "ship"), ("state", "pending")))] == 2
    assert got[("oncefire_backlog", (("function", "ship"),))] == 2
    assert got[("oncefire_oldest_pending_age_seconds", (("function", "ship"),))] == 30
    histogram = (("function", "charge"), w)
    assert got[("oncefire_attempt_duration_seconds_count", histogram)] == 5
    assert (
        got[("oncefire_attempt_duration_seconds_bucket", (*histogram[:1], ("le", "0.01"), w))] == 5
    )
    assert not any(name == "oncefire_rescues" for name, _ in got)  # no worker died


def test_metrics_count_rescues_of_deliveries_whose_worker_died(
    store_url: str, clock: TestClock
) -> None:
    shop = build(store_url, clock)
    try:
        shop.app.db.document("orders/o1").set({"n": 1})
        now = clock.now()
        leased = shop.app.store.lease_due(
            worker="dead-worker", now=now, lease_until=now + 30, limit=1,
            functions=["ship"], caps={},
        )  # fmt: skip
        # Its function started (only a started delivery is charged when its worker dies).
        assert shop.app.store.start([c.lease for c in leased], now)
        clock.advance(60)  # its lease ran out: the next worker rescues it
        shop.app.drain()
        text = TestClient(create_app(shop.app, allowed_hosts=["testserver"])).get("/metrics").text
    finally:
        shop.app.close()
    got = scrape(text)
    assert got[("oncefire_rescues", (("function", "ship"), ("window", "3600")))] == 1
    assert (
        got[
            (
                "oncefire_attempts",
                (("function", "ship"), ("outcome", "crashed"), ("window", "3600")),
            )
        ]
        == 1
    )


def test_metrics_count_dedupe_hits_and_unrouted_events_exactly(
    store_url: str, clock: TestClock
) -> None:
    shop = build(store_url, clock)
    app = shop.app
    sent: list[str] = []

    @app.on_message("receipts", name="send_receipt")
    @idempotent()
    def send_receipt(event: Any) -> None:
        sent.append(event.id)

    @app.on_message("points", name="add_points")
    def add_points(event: Any) -> None:
        with app.db.transaction() as tx:
            if not tx.claim(event.id):
                return
            tx.set(app.db.document(f"points/{event.id}"), {"n": 1})  # no function takes it

    try:
        # 3 runs of one receipt: 2 duplicates; 2 runs of one points event: 1 duplicate.
        deliver(app, "send_receipt", make_event("message.published", "receipts", {}), times=3)
        deliver(app, "add_points", make_event("message.published", "points", {}), times=2)
        app.publish("nobody-listens", {"n": 1})
        app.publish("nobody-listens", {"n": 2})
        app.db.document("invoices/i1").set({"n": 3})
        client = TestClient(create_app(app, allowed_hosts=["testserver"]))
        got = scrape(client.get("/metrics").text)
        # The hits leave the window (counted in hour buckets: their hour ends within two);
        # the unrouted events are still kept.
        clock.advance(2 * 3600 + 1)
        later = scrape(client.get("/metrics").text)
    finally:
        app.close()
    assert len(sent) == 1
    w = ("window", "3600")
    assert got[("oncefire_dedupe_hits", (("function", "send_receipt"), w))] == 2
    assert got[("oncefire_dedupe_hits", (("function", "add_points"), w))] == 1
    assert sum(name == "oncefire_dedupe_hits" for name, _ in got) == 2  # none for charge, ship
    # Unrouted: the two messages, invoices/i1, and the points document add_points wrote once.
    assert got[("oncefire_unrouted_events", ())] == 4
    assert not any(name == "oncefire_dedupe_hits" for name, _ in later)
    assert later[("oncefire_unrouted_events", ())] == 4
