"""The functions page's brake and warnings: pause and resume by API and by form (recorded in
the audit trail, CSRF-guarded), the options shown, unrouted events and unserved functions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from oncefire import App
from oncefire.testing import TestClock
from oncefire.web.dashboard import create_app
from tests.dashboard_shop import SECRET, TOKEN, Shop, build

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


@pytest.fixture
def shop(store_url: str, clock: TestClock) -> Iterator[Shop]:
    shop = build(store_url, clock)
    yield shop
    shop.app.close()


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


@pytest.mark.postgres_smoke
def test_pause_and_resume_through_the_api_hold_and_release_the_function(shop: Shop) -> None:
    http = TestClient(create_app(shop.app, token=TOKEN, allowed_hosts=["testserver"]))
    bearer = {"Authorization": f"Bearer {SECRET}"}
    paused = http.post("/api/functions/charge/pause", headers=bearer)
    assert (paused.status_code, paused.json()) == (200, {"paused": True})
    assert shop.app.store.paused_functions() == {"charge"}
    assert http.post("/api/functions/charge/pause", headers=bearer).json() == {"paused": False}
    shop.succeed(2)  # published and drained: nothing of charge runs
    assert shop.charged == []
    listed = {f["name"]: f for f in http.get("/api/functions", headers=bearer).json()}
    assert listed["charge"]["paused"] is True and listed["charge"]["pending"] == 2
    assert listed["ship"]["paused"] is False
    resumed = http.post("/api/functions/charge/resume", headers=bearer)
    assert (resumed.status_code, resumed.json()) == (200, {"resumed": True})
    assert shop.app.store.paused_functions() == set()
    assert shop.app.drain().attempts == 2
    assert len(shop.charged) == 2
    missing = http.post("/api/functions/nope/pause", headers=bearer)
    assert missing.status_code == 404 and "nope" in missing.json()["error"]
    audit = http.get("/api/audit", headers=bearer).json()
    assert [(e["actor"], e["action"], e["function"], e["count"]) for e in audit] == [
        ("ops", "resume", "charge", 1),
        ("ops", "pause", "charge", 0),
        ("ops", "pause", "charge", 1),
    ]


def test_pause_needs_a_csrf_token_and_a_same_site_origin(shop: Shop) -> None:
    http = TestClient(create_app(shop.app, allowed_hosts=["testserver"]))
    token = csrf_of(http.get("/").text)
    assert http.post("/functions/charge/pause", data={}).status_code == 403
    assert http.post("/api/functions/charge/pause").status_code == 403
    foreign = http.post(
        "/functions/charge/pause", data={"csrf": token}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    assert shop.app.store.paused_functions() == set()
    done = http.post("/functions/charge/pause", data={"csrf": token}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].endswith("/")
    page = http.get("/").text
    assert ">paused</span>" in page and 'class="primary resume"' in page
    resumed = http.post("/functions/charge/resume", data={"csrf": token}, follow_redirects=False)
    assert resumed.status_code == 303
    assert shop.app.store.paused_functions() == set()
    actions = [(e.actor, e.action) for e in shop.app.operators.audit_log()]
    assert actions == [("local", "resume"), ("local", "pause")]


def test_the_functions_page_shows_options_unrouted_events_and_unserved_functions(
    store_url: str, clock: TestClock
) -> None:
    retired = App(store_url, clock=clock)
    retired.on_message("old-topic", name="retired")(lambda event: None)
    retired.publish("old-topic", {"n": 1})  # a delivery for a function this app drops
    retired.close()
    app = App(store_url, clock=clock)

    def noop(event: Any) -> None:
        pass

    app.on_document_created(
        "orders/{o}", name="pack", rate_limit="30/m", ordering="document", budget="500/day"
    )(noop)
    try:
        app.db.document("invoices/i1").set({"n": 1})  # no function takes it
        http = TestClient(create_app(app, allowed_hosts=["testserver"]))
        listed = {f["name"]: f for f in http.get("/api/functions").json()}
        options = listed["pack"]["options"]
        assert (options["rate_limit"], options["ordering"], options["budget"]) == (
            "30/m",
            "document",
            "500/day",
        )
        assert listed["pack"]["unserved"] is None  # nothing waits for it
        assert listed["retired"]["unserved"] == (
            "this app does not register it: its 1 pending deliveries wait"
        )
        # No function ever took invoices: kept, not warned about, until an operator asks.
        assert http.get("/api/unrouted").json() == {"count": 0, "kept": 1, "origins": []}
        assert 'id="unrouted-warning"' not in http.get("/").text
        app.keep_unrouted("invoices")
        assert http.get("/api/unrouted").json() == {
            "count": 1,
            "kept": 1,
            "origins": [{"origin": "collection invoices", "events": 1}],
        }
        page = http.get("/").text
        assert "rate limit 30/m" in page and "ordered by document" in page
        assert "budget 500/day" in page
        assert 'id="unrouted-warning">1 event(s) matched no function' in page
        assert "collection invoices (1)" in page
        assert 'class="warning unserved" data-function="retired">retired: this app' in page
        app.db.document("orders/o1").set({"n": 1})  # pending for pack, whose worker never ran
        listed = {f["name"]: f for f in http.get("/api/functions").json()}
        assert listed["pack"]["unserved"] == (
            "no worker has served it yet: its 1 pending deliveries wait"
        )
        app.store.touch_functions(["pack"], clock.now())  # what a serving worker does
        assert http.get("/api/functions").json()[0]["unserved"] is None
        clock.advance(301)
        assert http.get("/api/functions").json()[0]["unserved"] == (
            "no worker has served it for 301 s: its 1 pending deliveries wait"
        )
    finally:
        app.close()


def test_the_openapi_document_describes_the_brake_and_unrouted_routes(shop: Shop) -> None:
    paths = (
        TestClient(create_app(shop.app, allowed_hosts=["testserver"]))
        .get("/api/openapi.json")
        .json()["paths"]
    )
    assert "post" in paths["/api/functions/{name}/pause"]
    assert "post" in paths["/api/functions/{name}/resume"]
    assert "get" in paths["/api/unrouted"]
