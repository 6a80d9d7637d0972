"""Alerts: a callback once per new dead letter across processes, thresholds once per crossing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from oncefire.engine.worker import Worker
from oncefire.errors import ConfigError
from oncefire.features.alerts import check_alerts
from oncefire.operations.deadletters import DeadLetter
from oncefire.testing import TestClock
from tests.dashboard_shop import Shop, build

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


@pytest.fixture
def shop(store_url: str, clock: TestClock) -> Iterator[Shop]:
    shop = build(store_url, clock)
    yield shop
    shop.app.close()


@pytest.mark.postgres_smoke
def test_each_dead_letter_is_notified_once_across_workers(
    shop: Shop, store_url: str, clock: TestClock
) -> None:
    other = build(store_url, clock)  # a second process on the same store
    seen: list[int] = []
    shop.app.on_dead_letter(lambda d: seen.append(d.id))
    other.app.on_dead_letter(lambda d: seen.append(d.id))
    try:
        shop.fail(2)
        clock.advance(1)
        assert check_alerts(shop.app.runtime, clock.now()) == 2
        assert check_alerts(other.app.runtime, clock.now()) == 0
        shop.fail(1)
        clock.advance(1)
        assert check_alerts(other.app.runtime, clock.now()) == 1
        assert check_alerts(shop.app.runtime, clock.now()) == 0
    finally:
        other.app.close()
    assert sorted(seen) == sorted(d.id for d in shop.app.dead_letters.list())
    assert len(seen) == 3


def test_a_failing_callback_is_called_again_at_the_next_check(shop: Shop, clock: TestClock) -> None:
    calls: list[DeadLetter] = []

    def flaky(letter: DeadLetter) -> None:
        calls.append(letter)
        if len(calls) == 1:
            raise RuntimeError("pager down")

    shop.app.on_dead_letter(flaky)
    shop.fail(1)
    assert check_alerts(shop.app.runtime, clock.now()) == 0
    assert check_alerts(shop.app.runtime, clock.now()) == 1
    assert check_alerts(shop.app.runtime, clock.now()) == 0
    assert [c.id for c in calls] == [calls[0].id] * 2


def test_a_threshold_fires_once_per_crossing(shop: Shop, clock: TestClock) -> None:
    fired: list[dict[str, Any]] = []
    shop.app.alerts.add("dead_letters > 2", name="too-many", hook=fired.append)
    shop.fail(2)
    assert check_alerts(shop.app.runtime, clock.now()) == 0
    shop.fail(1)
    assert check_alerts(shop.app.runtime, clock.now()) == 1
    assert check_alerts(shop.app.runtime, clock.now()) == 0  # still above: no second alert
    shop.app.dead_letters.dismiss_all()
    assert check_alerts(shop.app.runtime, clock.now()) == 0  # back below: armed again
    shop.fail(3)
    assert check_alerts(shop.app.runtime, clock.now()) == 1
    assert [(f["alert"], f["value"]) for f in fired] == [("too-many", 3.0), ("too-many", 3.0)]


def test_failure_rate_and_oldest_pending_age_thresholds(shop: Shop, clock: TestClock) -> None:
    fired: list[str] = []
    shop.app.alerts.add("failure_rate > 0.5", window=600, hook=lambda b: fired.append(b["alert"]))
    shop.app.alerts.add(
        "oldest_pending_age > 60", function="ship", hook=lambda b: fired.append(b["alert"])
    )
    shop.succeed(2)
    shop.fail(1)
    assert check_alerts(shop.app.runtime, clock.now()) == 0  # 1 of 3 failed; nothing pending
    shop.fail(2)
    shop.app.db.document("orders/o1").set({})  # pending, not run
    clock.advance(61)
    assert check_alerts(shop.app.runtime, clock.now()) == 2
    assert sorted(fired) == ["failure_rate>0.5", "oldest_pending_age>60"]
    clock.advance(600)  # the failures leave the window
    shop.app.drain()
    assert check_alerts(shop.app.runtime, clock.now()) == 0


def test_a_webhook_is_posted_the_alert(shop: Shop, clock: TestClock) -> None:
    bodies: list[Any] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/alerts"
        shop.app.alerts.add("dead_letters > 0", webhook=url)
        shop.fail(1)
        assert check_alerts(shop.app.runtime, clock.now()) == 1
    finally:
        server.shutdown()
        server.server_close()
    assert [(b["alert"], b["value"]) for b in bodies] == [("dead_letters>0", 1.0)]


def test_the_worker_checks_alerts_in_its_maintenance(shop: Shop, clock: TestClock) -> None:
    seen: list[int] = []
    shop.app.on_dead_letter(lambda d: seen.append(d.id))
    shop.fail(1)
    worker = Worker(shop.app.runtime)
    try:
        worker.maintain(force=True)
    finally:
        worker.shutdown()
    assert seen == [shop.app.dead_letters.list()[0].id]


def test_a_rule_that_is_not_understood_is_refused(shop: Shop) -> None:
    with pytest.raises(ConfigError, match="not understood"):
        shop.app.alerts.add("dead_letters >= 3", hook=print)
    with pytest.raises(ConfigError, match="hook"):
        shop.app.alerts.add("dead_letters > 3")
