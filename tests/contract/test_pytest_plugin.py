"""The oncefire_app fixture reaches users' tests through the pytest11 entry point."""

from __future__ import annotations

from oncefire import App
from oncefire.testing import TestClock


def test_oncefire_app_fixture_needs_no_import(oncefire_app: App) -> None:
    assert isinstance(oncefire_app.clock, TestClock)
    assert oncefire_app.settings.store.startswith("sqlite:////")  # a real file, not :memory:
    ran = []

    @oncefire_app.on_document_created("orders/{orderId}")
    def record(event: object) -> None:
        ran.append(event)

    oncefire_app.db.document("orders/o1").set({"amount": 1})
    assert oncefire_app.drain().attempts == 1
    assert len(ran) == 1
