"""/metrics after a known workload: counters that count exactly what happened and never go
down, a cumulative duration histogram, gauges for now; parsed as Prometheus reads it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from oncefire import App, Increment, idempotent
from oncefire.events import Event
from oncefire.testing import TestClock, deliver, make_event
from oncefire.web.dashboard import create_app
from tests.dashboard_shop import build

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(app: App) -> Samples:
    """Every sample of GET /metrics by (name, sorted labels)."""
    response = TestClient(create_app(app, allowed_hosts=["testserver"])).get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def of(function: str, **labels: str) -> tuple[tuple[str, str], ...]:
    """The sorted labels of a function's sample."""
    return tuple(sorted({"function": function, **labels}.items()))


@pytest.mark.postgres_smoke
def test_counters_count_attempts_dead_letters_and_the_gauges_say_now(
    store_url: str, clock: TestClock
) -> None:
    shop = build(store_url, clock)
    try:
        shop.succeed(2)
        shop.fail(3)
        shop.app.db.document("orders/o1").set({"n": 1})
        shop.app.db.document("orders/o2").set({"n": 2})
        clock.advance(30)
        got = scrape(shop.app)
    finally:
        shop.app.close()
    charge = of("charge")
    assert got[("oncefire_attempts_total", of("charge", outcome="succeeded"))] == 2
    assert got[("oncefire_attempts_total", of("charge", outcome="failed"))] == 3
    assert got[("oncefire_attempts_total", of("charge", outcome="timeout"))] == 0  # set out
    assert got[("oncefire_attempts_total", of("ship", outcome="succeeded"))] == 0
    assert got[("oncefire_deliveries_dead_lettered_total", charge)] == 3
    assert got[("oncefire_deliveries_dead_lettered_total", of("ship"))] == 0
    assert got[("oncefire_rescues_total", charge)] == 0  # no worker died
    assert got[("oncefire_dead_letters", charge)] == 3
    assert got[("oncefire_deliveries", of("charge", state="dead"))] == 3
    assert got[("oncefire_deliveries", of("ship", state="pending"))] == 2
    assert got[("oncefire_backlog", of("ship"))] == 2
    assert got[("oncefire_backlog", charge)] == 0  # listed, at zero: nothing pending
    assert got[("oncefire_oldest_pending_age_seconds", of("ship"))] == 30
    # The test clock stands still while a function runs: every attempt took 0 s.
    assert got[("oncefire_attempt_duration_seconds_count", charge)] == 5
    assert got[("oncefire_attempt_duration_seconds_bucket", of("charge", le="0.001"))] == 5
    assert got[("oncefire_attempt_duration_seconds_bucket", of("charge", le="+Inf"))] == 5
    assert not [labels for _, labels in got if "window" in dict(labels)]


def test_a_dead_letter_replayed_and_failing_again_is_counted_again(
    store_url: str, clock: TestClock
) -> None:
    shop = build(store_url, clock)
    try:
        shop.fail(1)
        (letter,) = shop.app.dead_letters.list()
        shop.app.dead_letters.replay(letter.id)
        shop.app.drain()
        (again,) = shop.app.dead_letters.list()
        shop.app.dead_letters.dismiss(again.id)
        got = scrape(shop.app)
    finally:
        shop.app.close()
    assert got[("oncefire_deliveries_dead_lettered_total", of("charge"))] == 2
    assert got[("oncefire_dead_letters", of("charge"))] == 0  # the gauge: none now
    assert got[("oncefire_attempts_total", of("charge", outcome="failed"))] == 2


def test_counters_count_rescues_of_deliveries_whose_worker_died(
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
        got = scrape(shop.app)
    finally:
        shop.app.close()
    assert got[("oncefire_rescues_total", of("ship"))] == 1
    assert got[("oncefire_attempts_total", of("ship", outcome="crashed"))] == 1
    assert got[("oncefire_attempts_total", of("ship", outcome="succeeded"))] == 1


def test_counters_count_dedupe_hits_and_the_unrouted_gauge_stays(
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
        app.keep_unrouted("nobody-listens")  # warned about; invoices and points are not
        app.publish("nobody-listens", {"n": 1})
        app.publish("nobody-listens", {"n": 2})
        app.db.document("invoices/i1").set({"n": 3})
        got = scrape(app)
        clock.advance(2 * 3600 + 1)  # counters do not slide out of a window
        later = scrape(app)
    finally:
        app.close()
    assert len(sent) == 1
    assert got[("oncefire_dedupe_hits_total", of("send_receipt"))] == 2
    assert got[("oncefire_dedupe_hits_total", of("add_points"))] == 1
    assert got[("oncefire_dedupe_hits_total", of("charge"))] == 0
    # Unrouted and warned about: the two messages of the kept topic (not invoices/i1, nor the
    # points document add_points wrote: no function ever took those collections).
    assert got[("oncefire_unrouted_events", ())] == 2
    assert later[("oncefire_dedupe_hits_total", of("send_receipt"))] == 2
    assert later[("oncefire_unrouted_events", ())] == 2


def test_counters_count_deliveries_that_waited_for_the_rate_limit(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    started: list[float] = []
    app.on_document_created("mail/{m}", name="send", rate_limit="1/m")(
        lambda event: started.append(clock.now())
    )
    for n in range(3):
        app.db.document(f"mail/m{n}").set({"n": n})
    app.drain()  # the first starts at once; the bucket (a burst of one) is then empty
    clock.advance(60)
    app.drain()  # the second had waited a minute for its token
    clock.advance(60)
    app.drain()  # and the third two
    clock.advance(3600)  # the bucket fills again: the next one waits for nothing
    app.db.document("mail/m3").set({"n": 3})
    app.drain()
    got = scrape(app)
    assert len(started) == 4
    assert got[("oncefire_deliveries_rate_limited_total", of("send"))] == 2
    assert got[("oncefire_attempts_total", of("send", outcome="succeeded"))] == 4


def test_counters_count_deliveries_a_stopped_loop_made_dead_letters(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(max_event_depth=3)

    @app.on_document_updated("counters/{c}")
    def bump(event: Event) -> None:
        app.db.document(event.source).update({"n": Increment(1)})

    @app.on_document_updated("counters/{c}", retry=False)
    def watch(event: Event) -> None:
        raise RuntimeError("a dead letter of another kind")

    ref = app.db.document("counters/c")
    ref.set({"n": 0})
    ref.update({"n": 1})
    app.drain()
    got = scrape(app)
    # The event at depth 3 stopped the loop: a dead letter for each function it had.
    assert got[("oncefire_deliveries_loop_stopped_total", of("bump"))] == 1
    assert got[("oncefire_deliveries_loop_stopped_total", of("watch"))] == 1
    assert got[("oncefire_deliveries_dead_lettered_total", of("bump"))] == 1
    assert got[("oncefire_deliveries_dead_lettered_total", of("watch"))] == 4  # 3 failed
    assert got[("oncefire_attempts_total", of("watch", outcome="failed"))] == 3


def test_a_forgotten_functions_pending_deliveries_are_counted_as_dead_letters(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    app.on_document_created("orders/{o}", name="ship")(lambda event: None)
    for n in range(3):
        app.db.document(f"orders/o{n}").set({"n": n})
    other = make_app()  # an app that no longer defines ship forgets it
    assert other.functions.forget("ship") == 3
    got = scrape(other)
    assert got[("oncefire_deliveries_dead_lettered_total", of("ship"))] == 3
