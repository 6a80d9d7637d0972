"""The Dead Letters tab and its API filtered by error text (a bounded search that says when
its count is a lower bound) and by error group (an index walk, exact), and bulk actions that
say how many they changed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

import oncefire.operations.deadletters
import oncefire.web.dashboard.views
from oncefire.testing import TestClock
from oncefire.web.dashboard import create_app
from tests.dashboard_shop import Shop, build

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


@pytest.fixture
def shop(store_url: str, clock: TestClock) -> Iterator[Shop]:
    shop = build(store_url, clock)
    shop.fail(3, error="card refused")
    shop.fail(2, error="network down")  # the two newest dead letters
    yield shop
    shop.app.close()


def client(shop: Shop) -> TestClient:
    return TestClient(create_app(shop.app, allowed_hosts=["testserver"]))


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


@pytest.mark.postgres_smoke
def test_an_error_text_filter_over_the_window_says_its_count_is_a_lower_bound(
    shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oncefire.operations.deadletters, "SEARCH_WINDOW", 3)
    http = client(shop)
    api = "/api/functions/charge/dead-letters"
    found = http.get(api, params={"error": "refused"}).json()
    assert (found["total"], found["count"], found["searched"]) == (5, 1, 3)
    assert found["count_is_lower_bound"] is True
    assert len(found["items"]) == 1
    badge = http.get(f"{api}/count", params={"error": "refused"}).json()
    assert badge == {"count": 1, "count_is_lower_bound": True}
    older = http.get(api, params={"error": "refused", "before": found["next_before"]}).json()
    assert (older["count"], older["count_is_lower_bound"]) == (2, False)
    tab = http.get("/functions/charge", params={"tab": "dead-letters", "error": "refused"})
    assert 'data-lower-bound="true"' in tab.text and "At least 1 dead letter(s) match" in tab.text
    assert 'id="search-older"' in tab.text and "Replay all at least 1 matching" in tab.text
    none = " ".join(
        http.get(
            "/functions/charge", params={"tab": "dead-letters", "error": "nowhere"}
        ).text.split()
    )
    assert "None match: searched the newest 3 of 5" in none and 'id="search-older"' in none


def test_an_error_text_filter_that_read_every_dead_letter_is_exact(shop: Shop) -> None:
    http = client(shop)
    found = http.get("/api/functions/charge/dead-letters", params={"error": "refused"}).json()
    assert (found["count"], found["count_is_lower_bound"], found["searched"]) == (3, False, 5)
    tab = http.get("/functions/charge", params={"tab": "dead-letters", "error": "refused"}).text
    assert 'data-lower-bound="false"' in tab and "3 dead letter(s) match" in tab
    assert "search-older" not in tab


@pytest.mark.postgres_smoke
def test_a_group_filter_counts_and_lists_exactly_that_group(shop: Shop) -> None:
    http = client(shop)
    api = "/api/functions/charge/dead-letters"
    group = "ConnectionError: network down"
    found = http.get(api, params={"group": group}).json()
    assert (found["count"], found["count_is_lower_bound"], len(found["items"])) == (2, False, 2)
    assert http.get(f"{api}/count", params={"group": group}).json()["count"] == 2
    both = http.get(api, params={"group": group, "error": "x"})
    assert both.status_code == 400
    tab = http.get("/functions/charge", params={"tab": "dead-letters"}).text
    link = "/functions/charge?tab=dead-letters&amp;group=ConnectionError%3A%20network%20down"
    assert f'{link}"' in tab


def test_a_bulk_replay_of_a_group_acts_on_the_group_and_says_how_many(shop: Shop) -> None:
    shop.fail(1, error="card refused twice")  # contains "card refused", another group
    http = client(shop)
    page = http.get("/functions/charge?tab=dead-letters").text
    form = {"csrf": csrf_of(page), "error_group": "ConnectionError: card refused"}
    done = http.post("/functions/charge/replay-all", data=form, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].endswith("replayed=3")
    assert "Replayed 3 dead letter(s)." in http.get(done.headers["location"]).text
    left = [(d.error or "").splitlines()[0] for d in shop.app.dead_letters.list("charge")]
    assert "ConnectionError: card refused twice" in left and len(left) == 3
    [entry] = shop.app.operators.audit_log(1)
    assert entry.detail == {"error_contains": None, "error_group": "ConnectionError: card refused"}
    answer = http.post(
        "/api/functions/charge/dead-letters/dismiss-all",
        json={"error_group": "ConnectionError: network down"},
        headers={"X-CSRF-Token": csrf_of(page)},
    )
    assert answer.json() == {"dismissed": 2}


def test_a_group_past_the_count_cap_says_its_count_is_a_lower_bound(
    shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oncefire.operations.deadletters, "GROUP_COUNT_CAP", 2)
    http = client(shop)
    api = "/api/functions/charge/dead-letters"
    group = {"group": "ConnectionError: card refused"}  # 3 dead letters
    found = http.get(api, params=group).json()
    assert (found["count"], found["count_is_lower_bound"], len(found["items"])) == (2, True, 3)
    assert http.get(f"{api}/count", params=group).json() == {
        "count": 2,
        "count_is_lower_bound": True,
    }
    tab = http.get("/functions/charge", params={"tab": "dead-letters", **group}).text
    assert "More than 2 dead letter(s) in the error group" in tab
    assert "Replay all at least 2 matching" in tab


def test_a_bulk_replay_from_the_dashboard_goes_in_batches_and_replays_every_match(
    shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oncefire.web.dashboard.views, "BULK_BATCH", 2)
    store = shop.app.store
    statements: list[int] = []
    replay = store.replay

    def counted(where: Any, now: float, ids: Any) -> int:
        statements.append(len(ids))
        return replay(where, now, ids)

    monkeypatch.setattr(store, "replay", counted)
    http = client(shop)
    page = http.get("/functions/charge?tab=dead-letters").text
    answer = http.post(
        "/api/functions/charge/dead-letters/replay-all",
        json={},
        headers={"X-CSRF-Token": csrf_of(page)},
    )
    assert answer.json() == {"replayed": 5}
    assert statements == [2, 2, 1]
    assert shop.app.dead_letters.count("charge") == 0
