"""The dashboard in a real Chromium: the badge refreshes itself, Replay, Dismiss, an edited
replay, a bulk replay of an error group, error text shown as text, cross-site POSTs refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.browser.conftest import Served
from tests.dashboard_shop import Shop

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


def dead_tab(dashboard: Served) -> str:
    return f"{dashboard.url}/functions/charge?tab=dead-letters"


def test_the_badge_count_rises_without_a_reload(shop: Shop, dashboard: Served, page: Any) -> None:
    shop.fail(1)
    page.goto(dead_tab(dashboard))
    badge = page.locator("#dead-badge")
    expect(badge).to_have_text("1")
    page.evaluate("window.stillTheSamePage = true")
    shop.fail(2)
    expect(badge).to_have_text("3")
    assert page.evaluate("window.stillTheSamePage") is True  # no reload happened


@pytest.mark.postgres_smoke
def test_replay_moves_an_entry_out(shop: Shop, dashboard: Served, page: Any) -> None:
    shop.fail(2)
    first, second = shop.app.dead_letters.list()
    page.goto(dead_tab(dashboard))
    page.locator(f'tr[data-dead-letter="{first.id}"] button.replay').click()
    expect(page.locator(f'tr[data-dead-letter="{first.id}"]')).to_have_count(0)
    expect(page.locator(f'tr[data-dead-letter="{second.id}"]')).to_have_count(1)
    assert [d.id for d in shop.app.dead_letters.list()] == [second.id]
    assert shop.app.store.delivery_states(first.event_id) == [("charge", "pending", 0)]


def test_dismiss_removes_an_entry(shop: Shop, dashboard: Served, page: Any) -> None:
    shop.fail(1)
    [letter] = shop.app.dead_letters.list()
    page.goto(dead_tab(dashboard))
    page.locator(f'tr[data-dead-letter="{letter.id}"] button.dismiss').click()
    expect(page.locator(f'tr[data-dead-letter="{letter.id}"]')).to_have_count(0)
    assert shop.app.dead_letters.count() == 0
    assert shop.app.store.delivery_states(letter.event_id) == []


def test_replay_with_an_edited_payload_runs_the_function_with_the_edit(
    shop: Shop, dashboard: Served, page: Any
) -> None:
    shop.fail(1, token="tok-secret-1")
    [letter] = shop.app.dead_letters.list()
    page.goto(f"{dashboard.url}/dead-letters/{letter.id}")
    editor = page.locator("#payload")
    shown = json.loads(editor.input_value())
    assert shown["data"]["token"] == "[redacted]"
    editor.fill("{not json")
    expect(page.locator("#edit-status")).to_have_class("bad")
    page.locator("#replay-edited").click()  # refused in the page: nothing is sent
    assert shop.app.dead_letters.count() == 1
    shown["data"].update(fail=False, note="edited by hand")
    editor.fill(json.dumps(shown))
    expect(page.locator("#edit-status")).to_have_text("Valid JSON.")
    page.locator("#replay-edited").click()
    expect(page).to_have_url(dead_tab(dashboard))
    assert shop.app.dead_letters.count() == 0
    shop.app.drain()
    assert shop.charged[-1]["note"] == "edited by hand"
    assert shop.charged[-1]["token"] == "tok-secret-1"
    [entry] = shop.app.operators.audit_log()
    assert (entry.action, entry.actor) == ("replay_edited", "local")


def test_a_bulk_replay_of_an_error_group(shop: Shop, dashboard: Served, page: Any) -> None:
    shop.fail(3, error="card declined")
    shop.fail(1, error="network down")
    page.goto(dead_tab(dashboard))
    asked: list[str] = []

    def confirm(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", confirm)
    group = page.locator("#groups tr", has_text="card declined")
    group.locator("button.group-replay").click()
    expect(page.locator("#groups tr", has_text="card declined")).to_have_count(0)
    assert asked == ["Replay every dead letter of this error group (3)?"]
    expect(page.locator("#bulk-done")).to_have_text("Replayed 3 dead letter(s).")
    [left] = shop.app.dead_letters.list()
    assert left.error is not None and "network down" in left.error
    [entry] = shop.app.operators.audit_log()
    assert (entry.action, entry.count) == ("replay_all", 3)


def test_a_bulk_dismiss_asks_first_and_does_nothing_when_declined(
    shop: Shop, dashboard: Served, page: Any
) -> None:
    shop.fail(2)
    page.goto(dead_tab(dashboard))
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.locator("#dismiss-filter").click()
    expect(page.locator("#dismiss-filter")).to_have_text("Dismiss all 2")
    assert shop.app.dead_letters.count() == 2


def test_an_error_text_with_a_script_shows_as_text_and_runs_nothing(
    shop: Shop, dashboard: Served, page: Any
) -> None:
    shop.fail(1, error="<script>window.pwned = true</script><img src=x onerror=pwned=1>")
    [letter] = shop.app.dead_letters.list()
    page.goto(dead_tab(dashboard))
    cell = page.locator(f'tr[data-dead-letter="{letter.id}"] td.error-text')
    expect(cell).to_contain_text("<script>window.pwned = true</script>")
    page.goto(f"{dashboard.url}/dead-letters/{letter.id}")
    expect(page.locator("#error")).to_contain_text("<script>window.pwned = true</script>")
    page.goto(f"{dashboard.url}/events/{letter.event_id}")
    expect(page.locator("#payload")).to_contain_text("<script>")
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_a_cross_site_form_post_is_refused(shop: Shop, dashboard: Served, page: Any) -> None:
    shop.fail(1)
    [letter] = shop.app.dead_letters.list()
    target = f"{dashboard.url}/dead-letters/{letter.id}/dismiss"
    form = (
        f'<form method="post" action="{target}"><input name="csrf" value="guess">'
        '<button id="go">win a prize</button></form>'
    )

    async def evil(request: Any) -> HTMLResponse:
        return HTMLResponse(form)

    other = Served(Starlette(routes=[Route("/", evil)]))
    try:
        page.goto(other.url.replace("127.0.0.1", "localhost") + "/")
        with page.expect_navigation() as sent:
            page.locator("#go").click()
        assert sent.value.status == 403
    finally:
        other.stop()
    assert shop.app.dead_letters.count() == 1
