"""`app.cost()` on each store: a workload with known counts of invocations, failed attempts,
store reads and writes and seconds, priced by a table of round numbers, and the cost section
of `app.audit()`."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from oncefire import App, PermanentError, RetryPolicy
from oncefire.errors import PriceTableError
from oncefire.events import Event
from oncefire.features.cost import CostReport
from oncefire.testing import TestClock

DAY = 86400.0
# One unit a invocation, a GB-second, a read; two a write; broken runs in 2 GB, the rest 0.5.
ROUND_PRICES = """\
currency = "EUR"
[compute]
per_million_invocations = 1000000
per_gb_second = 1.0
memory_gb = 0.5
per_cpu_second = 0
[store]
per_100k_reads = 100000
per_100k_writes = 200000
[functions.broken]
memory_gb = 2.0
"""
EVERY_SECOND = RetryPolicy(max_attempts=6, first_delay=1, multiplier=1, max_delay=1)


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(ROUND_PRICES, encoding="utf-8")
    return path


def run_workload(app: App, clock: TestClock) -> None:
    """10 `reader` events (1 attempt each: 5 reads, 2 writes, 0.5 s), 4 `flaky` events (3
    attempts each, the first two failing: 1 read, 1 write, 2 s each) and 3 `broken` events
    (1 failing attempt each, 1 s, nothing read or written)."""

    @app.on_document_created("orders/{id}", name="reader")
    def reader(event: Event) -> None:
        app.db.document("config/a").get()  # 1 read
        app.db.document("config/missing").get()  # 1 read: a missing document counts
        assert len(app.db.collection("config").get()) == 3  # 3 reads
        ref = app.db.document(f"receipts/{event.params['id']}")
        ref.set({"n": 1})  # 1 write
        ref.update({"n": 2})  # 1 write
        clock.advance(0.5)

    @app.on_document_created("payments/{id}", name="flaky", retry_policy=EVERY_SECOND)
    def flaky(event: Event) -> None:
        app.db.document("config/a").get()  # 1 read
        app.db.document(f"log/{event.params['id']}-{event.attempt}").set({"n": 1})  # 1 write
        clock.advance(2)
        if event.attempt < 3:
            raise RuntimeError("gateway timeout")

    @app.on_document_created("imports/{id}", name="broken", retry=False)
    def broken(event: Event) -> None:
        clock.advance(1)
        raise ValueError("bad file")

    for name in ("a", "b", "c"):
        app.db.document(f"config/{name}").set({"v": name})  # outside any attempt: not counted
    for n in range(10):
        app.db.document(f"orders/o{n}").set({"n": n})
    for n in range(4):
        app.db.document(f"payments/p{n}").set({"n": n})
    for n in range(3):
        app.db.document(f"imports/i{n}").set({"n": n})
    for _ in range(4):
        app.drain()
        clock.advance(1)


def by_name(report: CostReport) -> dict[str, dict[str, Any]]:
    return {f["function"]: f for f in report.to_dict()["functions"]}


def test_cost_counts_a_known_workload_and_prices_it(
    make_app: Callable[..., App], clock: TestClock, prices: Path
) -> None:
    app = make_app(concurrency=1)
    run_workload(app, clock)
    report = app.cost(since=DAY, prices=prices)
    figures = by_name(report)
    assert {
        name: (f["invocations"], f["failed_attempts"], f["reads"], f["writes"], f["seconds"])
        for name, f in figures.items()
    } == {
        "reader": (10, 0, 50, 20, pytest.approx(5.0)),
        "flaky": (12, 8, 12, 12, pytest.approx(24.0)),
        "broken": (3, 3, 0, 0, pytest.approx(3.0)),
    }
    assert (figures["flaky"]["failed_reads"], figures["flaky"]["failed_writes"]) == (8, 8)
    assert figures["flaky"]["outcomes"] == {"failed": 8, "succeeded": 4}
    assert figures["broken"]["outcomes"] == {"failed": 3}
    # reader: 10 invocations + 5 s x 0.5 GB + 50 reads + 20 writes x 2
    assert figures["reader"]["cost"] == pytest.approx(
        {"invocations": 10, "compute": 2.5, "store": 90, "total": 102.5}
    )
    # flaky: 12 + 24 x 0.5 + 12 + 12 x 2; its failures 8 + 16 x 0.5 + 8 + 8 x 2 = 40
    assert figures["flaky"]["cost"]["total"] == pytest.approx(60)
    assert figures["flaky"]["failure_cost"] == pytest.approx(40)
    assert figures["flaky"]["failure_cost_per_day"] == pytest.approx(40)
    # broken: 3 invocations + 3 s x 2 GB (its own memory), all of it failures
    assert figures["broken"]["failure_cost"] == pytest.approx(9)
    assert report.to_dict()["total"] == pytest.approx(
        {
            "invocations": 25,
            "failed_attempts": 11,
            "cost": 171.5,
            "failure_cost": 49,
            "failure_cost_per_day": 49,
        }
    )
    assert report.to_dict()["currency"] == "EUR"
    # Over a week the same failures cost a seventh as much a day.
    weekly = by_name(app.cost(since=7 * DAY, prices=prices))
    assert weekly["flaky"]["failure_cost_per_day"] == pytest.approx(40 / 7)
    lines = report.lines()
    assert "flaky: its failures cost 40.00 EUR a day at the current rate" in "\n".join(lines)
    assert not any(line.startswith("reader: its failures") for line in lines)


def test_cpu_seconds_are_measured_per_attempt_and_priced_when_asked(
    make_app: Callable[..., App], clock: TestClock, tmp_path: Path
) -> None:
    app = make_app(concurrency=1)

    @app.on_message("crunch", name="crunch")
    def crunch(event: Event) -> None:
        total = 0
        for n in range(300_000):
            total += n * n
        assert total > 0

    app.publish("crunch", {})
    app.drain()
    path = tmp_path / "cpu.toml"
    path.write_text("[compute]\nper_cpu_second = 1.0\nper_gb_second = 0\n", encoding="utf-8")
    figures = by_name(app.cost(since=DAY, prices=path))["crunch"]
    assert figures["cpu_seconds"] > 0
    assert figures["cost"]["compute"] == pytest.approx(figures["cpu_seconds"])
    assert figures["cost"]["invocations"] == pytest.approx(0.2e-6)  # the default price kept


def attempt_rows(app: App, event_id: str) -> list[tuple[str, float | None, float]]:
    """(outcome, CPU seconds, seconds) of each attempt of an event, as its row holds them."""
    mark = "?" if app.store.dialect == "sqlite" else "%s"
    query = (
        "SELECT outcome, cpu_seconds, finished_at - started_at FROM oncefire_attempts"
        f" WHERE event_id = {mark} ORDER BY number"
    )
    with app.store.read() as tx:
        conn = tx.conn  # type: ignore[attr-defined]
        return [tuple(row) for row in conn.execute(query, (event_id,)).fetchall()]


def test_each_attempt_row_holds_the_cpu_its_function_burned_and_not_its_waiting(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(concurrency=1)
    burned = 0.05  # CPU seconds each busy attempt spins for, by its own thread's clock

    @app.on_message("crunch", name="crunch", retry_policy=EVERY_SECOND)
    def crunch(event: Event) -> None:
        start = time.thread_time()
        while time.thread_time() - start < burned:
            pass
        if event.data.json["fail"] == "once" and event.attempt == 1:
            raise RuntimeError("gateway timeout")
        if event.data.json["fail"] == "always":
            raise PermanentError("bad file")

    @app.on_message("wait", name="wait")
    def wait(event: Event) -> None:
        start = time.perf_counter()
        time.sleep(0.2)  # waiting on the outside: seconds pass, no CPU is spent
        clock.advance(time.perf_counter() - start)  # the attempt's row gets those seconds

    retried = app.publish("crunch", {"fail": "once"})
    buried = app.publish("crunch", {"fail": "always"})
    waited = app.publish("wait", {})
    app.drain()
    clock.advance(1)
    app.drain()
    busy = attempt_rows(app, retried) + attempt_rows(app, buried)
    assert [outcome for outcome, _, _ in busy] == ["failed", "succeeded", "permanent"]
    for _, cpu, _ in busy:  # retried, succeeded and buried: each row has its CPU
        assert cpu is not None and cpu >= burned
    [(outcome, cpu, seconds)] = attempt_rows(app, waited)
    assert outcome == "succeeded" and seconds >= 0.2
    assert cpu is not None and cpu < seconds / 2


def test_history_outside_the_window_and_functions_that_never_ran(
    make_app: Callable[..., App], clock: TestClock, prices: Path
) -> None:
    app = make_app(concurrency=1)
    run_workload(app, clock)
    clock.advance(3 * DAY)
    figures = by_name(app.cost(since=DAY, prices=prices))
    assert set(figures) == {"reader", "flaky", "broken"}  # registered: listed with zeros
    assert all(f["invocations"] == 0 and f["cost"]["total"] == 0 for f in figures.values())
    assert not app.cost(since=DAY).has_attempts


def test_the_audit_report_carries_the_cost_section(
    make_app: Callable[..., App], clock: TestClock, prices: Path
) -> None:
    app = make_app(concurrency=1)
    run_workload(app, clock)
    report = app.audit(since=DAY, is_static=False, prices=prices)
    cost = report.to_dict()["cost"]
    assert cost["total"]["failed_attempts"] == 11
    assert {f["function"]: f["failure_cost"] for f in cost["functions"]} == pytest.approx(
        {"reader": 0, "flaky": 40, "broken": 9}
    )


def test_a_bad_price_table_is_one_clear_error(make_app: Callable[..., App], tmp_path: Path) -> None:
    app = make_app()
    bad = tmp_path / "bad.toml"
    cases = {
        "[compute\n": "is not valid TOML",
        "[compute]\nper_gb_second = -1\n": "compute.per_gb_second = -1 must be a number",
        "[compute]\nper_gb_secnd = 1\n": "unknown key compute.per_gb_secnd",
        "[storage]\n": "unknown key 'storage'",
        '[store]\nper_100k_reads = "cheap"\n': "store.per_100k_reads = 'cheap'",
        "[functions.f]\nmemory = 1\n": "[functions.f] takes memory_gb only",
    }
    for text, words in cases.items():
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(PriceTableError, match=r"bad\.toml") as caught:
            app.cost(prices=bad)
        assert words in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(PriceTableError, match="Cannot read the price table"):
        app.cost(prices=tmp_path / "missing.toml")


def test_an_async_function_has_its_reads_and_writes_counted(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(concurrency=1)

    @app.on_message("audit-trail", name="trail")
    async def trail(event: Event) -> None:
        app.db.document("config/a").get()
        app.db.collection("config").get()  # empty: counts 1
        with app.db.transaction() as tx:
            tx.claim(event.id)
            tx.set(app.db.document(f"trail/{event.id}"), {"seen": True})

    for n in range(3):
        app.publish("audit-trail", {"n": n})
    app.drain()
    figures = by_name(app.cost(since=DAY))["trail"]
    assert (figures["invocations"], figures["reads"], figures["writes"]) == (3, 6, 6)
