"""The figures the functions page, a function's Triggers tab and the audit page show, each
checked against a known workload in the JSON API and in the HTML: a function's options,
failures, backlog and oldest pending age; p50/p95 durations and dedupe hits; the badge's
refresh period; the audit trail's entries."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from oncefire import App, RetryPolicy, idempotent
from oncefire.testing import TestClock, deliver, make_event
from oncefire.web.dashboard import create_app
from tests.dashboard_shop import SECRET, TOKEN, Shop, build

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


@pytest.fixture
def app(store_url: str, clock: TestClock) -> Iterator[App]:
    app = App(store_url, clock=clock)
    yield app
    app.close()


def client(app: App, **options: Any) -> TestClient:
    return TestClient(create_app(app, allowed_hosts=["testserver"], **options))


def row_of(html: str, table: str, attribute: str) -> str:
    """The HTML of the row of a table whose opening tag carries the attribute."""
    body = html.split(f'<table id="{table}">', 1)[1].split("</table>", 1)[0]
    match = re.search(rf"<tr {re.escape(attribute)}>(.*?)</tr>", body, re.S)
    assert match, f"no row with {attribute} in the table {table}"
    return match.group(1)


def rows_of(html: str, table: str) -> list[list[str]]:
    """The cells of each row of a table below its heading."""
    body = html.split(f'<table id="{table}">', 1)[1].split("</table>", 1)[0]
    return [cells(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S) if "<td" in r]


def cells(row: str) -> list[str]:
    """The text of each cell of a row, tags dropped and spaces joined."""
    found = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in found]


def card(html: str, label: str) -> str:
    """The bold figure of a card on the Triggers tab."""
    match = re.search(rf'<div class="card">{re.escape(label)} <b>([^<]*)</b>', html)
    assert match, f"no card {label!r}"
    return match.group(1)


def test_the_functions_page_and_api_show_options_failures_backlog_and_oldest_age(
    app: App, clock: TestClock
) -> None:
    policy = RetryPolicy(max_attempts=3, first_delay=7, multiplier=4, max_delay=20)

    @app.on_message("settlements", name="settle", retry_policy=policy, timeout=45, max_instances=3)
    def settle(event: Any) -> None:
        if event.data.data.get("fail"):
            raise ValueError("bank offline")

    app.publish("settlements", {"fail": True, "n": 1})
    app.publish("settlements", {"fail": True, "n": 2})
    for delay in (0, 7, 20):  # each attempt of both, at the delays the policy gives
        clock.advance(delay)
        app.drain()
    assert app.dead_letters.count("settle") == 2  # 2 events x 3 attempts: 6 failures
    app.publish("settlements", {"n": 3})
    clock.advance(40)
    app.publish("settlements", {"n": 4})
    app.publish("settlements", {"n": 5})  # 3 pending, the oldest due 40 s ago
    clock.advance(1)
    http = client(app)

    [shown] = http.get("/api/functions").json()
    assert shown["name"] == "settle" and shown["kind"] == "message"
    assert shown["source"] == "settlements"
    options = shown["options"]
    assert options["retry_policy"] == {
        "max_attempts": 3,
        "first_delay": 7,
        "multiplier": 4,
        "max_delay": 20,
    }
    assert (options["timeout"], options["max_instances"]) == (45, 3)
    assert (shown["failed"], shown["succeeded"], shown["dead_letters"]) == (6, 0, 2)
    assert (shown["pending"], shown["oldest_pending_age"]) == (3, 41)

    row = cells(row_of(http.get("/").text, "functions", 'data-function="settle"'))
    name, trigger, options_text, _bar, failures, pending, oldest, dead, _brake = row
    assert (name, trigger) == ("settle", "message settlements")
    times = "\N{MULTIPLICATION SIGN}"
    assert options_text == (
        f"up to 3 attempts, first delay 7 s, {times}4, at most 20 s, timeout 45 s, max 3 at once"
    )
    assert (failures, pending, oldest, dead) == ("6", "3", "41 s", "2")


@pytest.mark.postgres_smoke
def test_the_triggers_tab_shows_p50_and_p95_of_known_durations(app: App, clock: TestClock) -> None:
    @app.on_message("images", name="resize")
    def resize(event: Any) -> None:
        clock.advance(event.data.data["seconds"])  # the attempt's duration, on the app's clock

    # 4 attempts of 3 ms, 5 of 30 ms, 1 of 7 s: the 5th and the 10th are the 50th and 95th
    # percentiles, shown as their duration bin's upper bound (5 ms bin: 0.0025-0.005 s).
    for seconds in [0.003] * 4 + [0.03] * 5 + [7.0]:
        app.publish("images", {"seconds": seconds})
        app.drain()  # one at a time, so no two attempts overlap on the clock
    http = client(app)
    shown = http.get("/api/functions/resize").json()
    assert (shown["succeeded"], shown["failed"]) == (10, 0)
    assert (shown["p50_duration"], shown["p95_duration"]) == (0.05, 10.0)
    page = http.get("/functions/resize?tab=triggers").text
    assert (card(page, "p50"), card(page, "p95")) == ("50 ms", "10 s")
    assert card(page, "succeeded") == "10"


def test_the_triggers_tab_counts_each_dedupe_hit(app: App) -> None:
    sent: list[str] = []

    @app.on_message("receipts", name="send_receipt")
    @idempotent()
    def send_receipt(event: Any) -> None:
        sent.append(event.id)

    # One receipt delivered 4 times and another 2 times: 3 + 1 duplicates skipped.
    deliver(app, "send_receipt", make_event("message.published", "receipts", {}), times=4)
    deliver(app, "send_receipt", make_event("message.published", "receipts", {}), times=2)
    assert len(sent) == 2
    http = client(app)
    assert http.get("/api/functions/send_receipt").json()["dedupe_hits"] == 4
    page = http.get("/functions/send_receipt?tab=triggers").text
    assert card(page, "dedupe hits") == "4"


def test_the_dead_letter_badge_is_given_a_15_second_refresh_by_default(
    store_url: str, clock: TestClock
) -> None:
    shop = build(store_url, clock)
    try:
        shop.fail(2)
        for http, period in (
            (client(shop.app), "15000"),
            (client(shop.app, refresh_seconds=2.5), "2500"),
        ):
            page = http.get("/functions/charge?tab=dead-letters").text
            badge = re.search(r'<span id="dead-badge"[^>]*>', page)
            assert badge, "no dead-letter badge on the page"
            assert f'data-refresh-ms="{period}"' in badge.group(0)
            url = re.search(r'data-refresh-url="([^"]+)"', badge.group(0))
            assert url and http.get(url.group(1)).json() == {
                "count": 2,
                "count_is_lower_bound": False,
            }
        script = client(shop.app).get("/static/dashboard.js").text
        assert '"data-refresh-ms")) || 15000' in script  # the script's own default agrees
    finally:
        shop.app.close()


def test_the_audit_page_lists_an_api_dismiss_with_who_what_and_when(
    store_url: str, clock: TestClock
) -> None:
    shop: Shop = build(store_url, clock)
    try:
        shop.fail(2)
        first = shop.app.dead_letters.list()[-1]
        clock.advance(3600)
        http = client(shop.app, token=TOKEN)
        bearer = {"Authorization": f"Bearer {SECRET}"}
        assert http.post(f"/api/dead-letters/{first.id}/dismiss", headers=bearer).json() == {
            "dismissed": 1
        }
        clock.advance(60)  # the page is read a minute later: it shows when the dismiss was
        page = http.get("/audit", headers=bearer)
        assert page.status_code == 200
        [row] = rows_of(page.text, "audit")
    finally:
        shop.app.close()
    when, who, action, function, target, count, _detail = row
    assert when == "2027-01-15 09:00:00"  # the TestClock's start, 1_800_000_000, plus an hour
    assert (who, action, function, target, count) == (
        "ops",
        "dismiss",
        "charge",
        str(first.id),
        "1",
    )
