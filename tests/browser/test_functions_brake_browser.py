"""The functions page in a real Chromium: Pause (after a confirmation) then Resume a function,
each through the form, the store and the audit trail following."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Served
from tests.dashboard_shop import Shop

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


def test_pause_then_resume_a_function_from_the_functions_page(
    shop: Shop, dashboard: Served, page: Any
) -> None:
    asked: list[str] = []

    def confirm(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", confirm)
    page.goto(dashboard.url)
    row = page.locator('#functions tr[data-function="charge"]')
    row.locator("button.pause").click()
    expect(row.locator(".paused")).to_have_text("paused")
    assert asked == ["Pause charge? Its deliveries stay pending and nothing of it runs."]
    assert shop.app.store.paused_functions() == {"charge"}
    shop.succeed(1)
    assert shop.charged == []  # paused: the message waits
    row.locator("button.resume").click()
    expect(row.locator("button.pause")).to_have_count(1)
    assert shop.app.store.paused_functions() == set()
    assert shop.app.drain().attempts == 1 and len(shop.charged) == 1
    actions = [(e.action, e.function) for e in shop.app.operators.audit_log()]
    assert actions == [("resume", "charge"), ("pause", "charge")]
