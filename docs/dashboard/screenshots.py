"""Take the screenshots of docs/dashboard.md: a shop with a day of history, every page.

Run from the repository root: .venv/bin/python docs/dashboard/screenshots.py
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
sys.path.insert(0, str(HERE.parents[1] / "tests" / "browser"))

from conftest import CHROMIUM, CHROMIUM_ARGS, Served  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from oncefire import App, RetryPolicy  # noqa: E402
from oncefire.web.dashboard import create_app  # noqa: E402
from oncefire.testing import TestClock  # noqa: E402

TOKEN = "dashboard-demo-token-0001"


def shop(url: str, clock: TestClock) -> App:
    """A shop with a day of history: charges that sometimes fail, receipts, a nightly report."""
    app = App(url, clock=clock)
    rng = random.Random(7)

    @app.on_message("payments", name="charge_card", retry=False, max_instances=8)
    def charge_card(event: Any) -> None:
        body = event.data.data
        if body.get("declined"):
            raise ConnectionError("card gateway timed out after 10 s")
        if body.get("bad_currency"):
            raise ValueError(f"unsupported currency {body['currency']!r}")

    @app.on_document_created(
        "orders/{order}", name="send_receipt", retry_policy=RetryPolicy(5, 30, 2, 600), timeout=20
    )
    def send_receipt(event: Any) -> None:
        if event.params["order"].endswith("7"):
            raise RuntimeError("<smtp> 421 too many connections")

    @app.on_message("reports", name="nightly_report", timeout=300)
    def nightly_report(event: Any) -> None:
        pass

    app.on_dead_letter(lambda letter: None)
    for hour in range(24):
        for i in range(rng.randint(6, 14)):
            declined = rng.random() < (0.25 if 14 <= hour <= 16 else 0.04)
            body = {"order": f"o{hour}-{i}", "amount": rng.randint(5, 400), "currency": "EUR",
                    "card": {"last4": "4242", "api_key": "sk_live_demo"}}
            if declined:
                body["declined"] = True
            if hour == 20 and i == 0:
                body.update(bad_currency=True, currency="XTS")
            app.publish("payments", body)
            app.db.document(f"orders/o{hour}-{i}").set({"amount": body["amount"]})
        app.publish("reports", {"day": "2026-11-30"})
        app.drain()
        clock.advance(3600)
    app.db.document("orders/o-late-1").set({"amount": 12})
    app.db.document("orders/o-late-2").set({"amount": 30})
    app.publish("refunds", {"order": "o3-2"})  # no function listens: kept as unrouted
    clock.advance(95)
    return app


def unserved(url: str, clock: TestClock) -> None:
    """A function another app stored, with a delivery waiting that no worker serves."""
    other = App(url, clock=clock)
    other.on_document_created("customers/{customer}", name="sync_crm")(lambda event: None)
    other.db.document("customers/c-18").set({"name": "Ada"})
    other.close()


def main() -> None:
    """Write docs/dashboard/*.png."""
    clock = TestClock(1_859_720_400.0)  # 2028-12-05 00:00 UTC
    folder = tempfile.mkdtemp(prefix="oncefire-shots-")
    app = shop(f"sqlite:///{folder}/shop.db", clock)
    unserved(f"sqlite:///{folder}/shop.db", clock)
    clock.advance(600)  # past UNSERVED_AFTER: sync_crm shows as unserved
    app.store.touch_functions(list(app.triggers), clock.now())  # what a running worker says
    app.operators.pause("nightly_report", actor="carol")
    letters = app.dead_letters.list("charge_card")
    app.operators.replay(letters[-1].id, actor="alice")
    app.operators.dismiss_all("send_receipt", error_contains="421", actor="bob")
    served = Served(create_app(app))
    locked = Served(create_app(app, token=TOKEN))
    base = served.url
    letter = app.dead_letters.list("charge_card")[0]
    pages = {
        "functions": f"{base}/",
        "triggers": f"{base}/functions/charge_card",
        "dead-letters": f"{base}/functions/charge_card?tab=dead-letters",
        "dead-letters-search": f"{base}/functions/charge_card?tab=dead-letters&error=timed+out",
        "executions": f"{base}/functions/charge_card?tab=executions",
        "dead-letter": f"{base}/dead-letters/{letter.id}",
        "event": f"{base}/events/{letter.event_id}",
        "audit": f"{base}/audit",
        "login": f"{locked.url}/",
    }
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            for name, url in pages.items():
                page.goto(url)
                page.screenshot(path=str(HERE / f"{name}.png"), full_page=name != "executions")
            browser.close()
    finally:
        served.stop()
        locked.stop()
        app.close()


if __name__ == "__main__":
    main()
