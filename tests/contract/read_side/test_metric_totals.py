"""The totals /metrics counts from (schema 27): kept apart from the history retention purges, so
a counter never goes down; started from the hour buckets when an older store upgrades."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from oncefire import App, idempotent
from oncefire.events import Event
from oncefire.testing import TestClock, deliver, make_event
from oncefire.web.dashboard.metrics import exposition
from tests.contract.old_schema import build_old_store

DAY = 86400.0


def counters(app: App) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every counter and histogram sample of the app's /metrics, by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(exposition(app).decode()):
        if family.type in ("counter", "histogram"):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_counters_never_go_down_when_retention_purges_what_they_counted(
    app: App, clock: TestClock
) -> None:
    @app.on_message("payments", name="charge", retry=False)
    def charge(event: Event) -> None:
        if event.data.data.get("fail"):
            raise ValueError("card declined")

    @app.on_message("receipts", name="send_receipt")
    @idempotent()
    def send_receipt(event: Event) -> None:
        pass

    for n in range(4):
        app.publish("payments", {"n": n, "fail": n == 3})
    deliver(app, "send_receipt", make_event("message.published", "receipts", {}), times=2)
    app.drain()
    before = counters(app)
    assert before[("oncefire_attempts_total", (("function", "charge"), ("outcome", "succeeded")))]
    clock.advance(100 * DAY)  # past every retention: succeeded work, dedupe hits, hour buckets
    purged = app.purge()
    assert purged.attempts == 5 and purged.buckets > 0  # the history they counted is gone
    after = counters(app)
    assert after == before
    app.publish("payments", {"n": 4})
    app.drain()
    grown = counters(app)
    key = ("oncefire_attempts_total", (("function", "charge"), ("outcome", "succeeded")))
    assert grown[key] == before[key] + 1
    assert all(grown[k] >= v for k, v in before.items())


def test_the_exposition_is_prometheus_text_with_counters_and_a_histogram(
    app: App, clock: TestClock
) -> None:
    app.on_document_created("orders/{o}", name="ship")(lambda event: None)
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    families = {f.name: f for f in text_string_to_metric_families(exposition(app).decode())}
    text = exposition(app).decode()
    for name in (
        "oncefire_attempts",
        "oncefire_rescues",
        "oncefire_dedupe_hits",
        "oncefire_deliveries_dead_lettered",
        "oncefire_deliveries_rate_limited",
        "oncefire_deliveries_loop_stopped",
    ):
        assert families[name].type == "counter", name
        assert f"# TYPE {name}_total counter" in text
        assert all(s.name == f"{name}_total" for s in families[name].samples)
    durations = families["oncefire_attempt_duration_seconds"]
    assert durations.type == "histogram"
    buckets = [s for s in durations.samples if s.name.endswith("_bucket")]
    bounds = [float(s.labels["le"]) for s in buckets]
    assert bounds == sorted(bounds) and bounds[-1] == float("inf")
    values = [s.value for s in buckets]
    assert values == sorted(values) and values[-1] == 1  # cumulative
    for gauge in ("oncefire_backlog", "oncefire_dead_letters", "oncefire_deliveries"):
        assert families[gauge].type == "gauge"
    assert not [s for f in families.values() for s in f.samples if "window" in s.labels]


OLD_VERSION = 26  # before the totals


def make_old_store(url: str) -> None:
    """Schema 26 with hour buckets, two dead letters (one of a stopped loop), and no totals."""
    rows = [
        "INSERT INTO oncefire_events (id, type, source, time, data, size)"
        " VALUES ('e1', 'message.published', 'payments', 1.0, '{}', 2)",
        "INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at, error,"
        " dead_at) VALUES ('e1', 'charge', 'dead', 1.0, 1.0, 'card declined', 2.0),"
        " ('e1', 'bump', 'dead', 1.0, 1.0,"
        " 'recursive loop stopped at depth 16 (root event e0)', 2.0)",
        "INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum,"
        " cpu_sum, max_number) VALUES ('charge', 0, 'succeeded', 3, 5, 0.04, 0, 1),"
        " ('charge', 3600, 'succeeded', 3, 2, 0.01, 0, 1),"
        " ('charge', 3600, 'failed', 9, 1, 1.5, 0, 1), ('charge', 3600, 'dedupe', 0, 4, 0, 0, 0)",
    ]
    build_old_store(url, OLD_VERSION, rows)


@pytest.mark.empty_store  # it makes an older schema itself
def test_an_upgraded_store_starts_its_totals_from_its_hour_buckets(
    store_url: str, make_app: Callable[..., App]
) -> None:
    make_old_store(store_url)
    app = make_app()
    assert app.store.migrate() >= 27
    totals = app.history.totals()
    charge, bump = totals["charge"], totals["bump"]
    assert charge.attempts == {"succeeded": 7, "failed": 1}
    assert charge.by_bin == {3: 7, 9: 1}
    assert abs(charge.duration_sum - 1.55) < 1e-9
    assert (charge.dedupe_hits, charge.dead_letters, charge.loops_stopped) == (4, 1, 0)
    assert (bump.attempts, bump.dead_letters, bump.loops_stopped) == ({}, 1, 1)
    # And they grow from there.
    app.on_message("payments", name="charge")(lambda event: None)
    app.publish("payments", {"n": 1})
    app.drain()
    assert app.history.totals()["charge"].attempts["succeeded"] == 8


def test_totals_list_every_function_asked_for_at_zero(app: App) -> None:
    totals: dict[str, Any] = app.history.totals(["ship"])
    ship = totals["ship"]
    assert (ship.attempts, ship.dead_letters, ship.rescues) == ({}, 0, 0)
    assert ship.cumulative()[-1] == (float("inf"), 0)
