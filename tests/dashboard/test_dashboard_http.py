"""The dashboard over HTTP: pages, API actions and the audit trail, guards, mounting."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from oncefire import App
from oncefire.errors import ConfigError, FunctionNotFoundError
from oncefire.testing import TestClock
from oncefire.web.dashboard import create_app, views
from oncefire.web.dashboard.security import check_bind, load_tokens
from tests.dashboard_shop import SECRET, TOKEN, Shop, build

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke


@pytest.fixture
def shop(store_url: str, clock: TestClock) -> Iterator[Shop]:
    shop = build(store_url, clock)
    yield shop
    shop.app.close()


def client(shop: Shop, **options: object) -> TestClient:
    web = create_app(shop.app, allowed_hosts=["testserver"], **options)  # type: ignore[arg-type]
    return TestClient(web)


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


@pytest.mark.postgres_smoke
def test_pages_show_functions_dead_letters_and_events(shop: Shop) -> None:
    shop.succeed(2)
    shop.fail(1, error="<script>alert(1)</script>")
    http = client(shop)
    home = http.get("/")
    assert home.status_code == 200
    assert 'data-function="charge"' in home.text and 'data-function="ship"' in home.text
    assert "66.7%" in home.text  # 2 of 3 attempts succeeded: red
    assert 'class="red"' in home.text
    tab = http.get("/functions/charge?tab=dead-letters").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in tab
    assert "<script>alert(1)" not in tab
    [letter] = shop.app.dead_letters.list()
    page = http.get(f"/dead-letters/{letter.id}").text
    assert "&lt;script&gt;" in page and "<script>alert" not in page
    event = http.get(f"/events/{letter.event_id}")
    assert event.status_code == 200 and "ConnectionError" in event.text
    executions = http.get("/functions/charge?tab=executions&outcome=failed").text
    assert executions.count(f"/events/{letter.event_id}") == 1
    assert "Failures per hour" in http.get("/functions/charge").text


def test_every_page_and_answer_carries_the_security_headers(shop: Shop) -> None:
    response = client(shop).get("/")
    policy = response.headers["content-security-policy"]
    assert "unsafe-inline" not in policy and "script-src 'self'" in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert "<script>" not in response.text.replace('<script src="', "")


def test_api_actions_are_recorded_in_the_audit_trail_with_the_token_name(shop: Shop) -> None:
    shop.fail(3, error="card declined")
    shop.fail(1, error="network down")
    http = client(shop, token=TOKEN)
    bearer = {"Authorization": f"Bearer {SECRET}"}
    groups = http.get("/api/functions/charge/dead-letters", headers=bearer).json()["groups"]
    assert [(g["error"], g["count"]) for g in groups] == [
        ("ConnectionError: card declined", 3),
        ("ConnectionError: network down", 1),
    ]
    first = shop.app.dead_letters.list(error_contains="network")[0]
    assert http.post(f"/api/dead-letters/{first.id}/dismiss", headers=bearer).status_code == 200
    answer = http.post(
        "/api/functions/charge/dead-letters/replay-all",
        headers=bearer,
        json={"error_contains": "card declined"},
    )
    assert answer.json() == {"replayed": 3}
    log = http.get("/api/audit", headers=bearer).json()
    assert [(e["actor"], e["action"], e["count"]) for e in log] == [
        ("ops", "replay_all", 3),
        ("ops", "dismiss", 1),
    ]


def test_replay_edited_through_the_api_runs_the_edit_and_keeps_redacted_secrets(
    shop: Shop,
) -> None:
    shop.fail(1, api_key="k-123")
    [letter] = shop.app.dead_letters.list()
    http = client(shop, token=TOKEN)
    bearer = {"Authorization": f"Bearer {SECRET}"}
    shown = http.get(f"/api/dead-letters/{letter.id}", headers=bearer).json()
    assert shown["payload"]["data"]["api_key"] == "[redacted]"
    assert (shown["attempts"], [a["outcome"] for a in shown["history"]]) == (1, ["failed"])
    edited = dict(shown["payload"])
    edited["data"] = {**edited["data"], "fail": False, "note": "fixed"}
    answer = http.post(
        f"/api/dead-letters/{letter.id}/replay-edited", headers=bearer, json={"payload": edited}
    )
    assert answer.status_code == 200
    shop.app.drain()
    assert shop.charged[-1]["note"] == "fixed"
    assert shop.charged[-1]["api_key"] == "k-123"  # the secret kept its value
    assert shop.app.dead_letters.count() == 0
    [entry] = shop.app.operators.audit_log()
    assert entry.action == "replay_edited" and entry.actor == "ops"
    assert entry.detail["before"]["data"]["fail"] is True
    assert entry.detail["after"]["data"]["note"] == "fixed"
    assert entry.detail["after"]["data"]["api_key"] == "[redacted]"


def test_bad_input_gets_a_4xx_with_a_json_message(shop: Shop) -> None:
    http = client(shop)
    assert http.get("/api/functions/nope").status_code == 404
    assert http.get("/api/dead-letters/99").json()["error"].startswith("No dead letter 99")
    assert http.get("/api/functions/charge/executions?limit=x").status_code == 400
    assert http.get("/api/functions/charge/executions?outcome=odd").status_code == 400
    assert http.get("/api/events/nope").status_code == 404


def test_an_unknown_function_raises_the_one_function_not_found_error(shop: Shop) -> None:
    with pytest.raises(FunctionNotFoundError, match="No function named 'nope'"):
        views.trigger_of(shop.app, "nope")
    with pytest.raises(FunctionNotFoundError):
        views.dead_letters(shop.app, "nope")
    answer = client(shop).get("/api/functions/nope/dead-letters")
    assert answer.status_code == 404
    assert answer.json()["error"] == "No function named 'nope' is registered with this app."


def routes_of(web: Starlette) -> list[tuple[str, str]]:
    """(method, path with sample parameters) of every route but /healthz and the static files."""
    out = []
    for route in web.routes:
        if not isinstance(route, Route) or route.path == "/healthz":
            continue
        path = route.path.replace("{name:str}", "charge").replace("{id:int}", "1")
        path = path.replace("{id:str}", "e1")
        for method in sorted(route.methods or ()):
            if method != "HEAD" and (method, path) != ("POST", "/login"):
                out.append((method, path))
    return out


def test_every_route_needs_the_token_when_one_is_set(shop: Shop) -> None:
    web = create_app(shop.app, token=TOKEN, allowed_hosts=["testserver"])
    http = TestClient(web)
    routes = routes_of(web)
    assert len(routes) >= 25
    for method, path in routes:
        assert http.request(method, path).status_code == 401, (method, path)
        wrong = {"Authorization": "Bearer wrong-token-wrong-token"}
        assert http.request(method, path, headers=wrong).status_code == 401, (method, path)
    assert http.get("/healthz").status_code == 200
    assert http.get("/", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 200


def test_sign_in_sets_a_strict_http_only_cookie(shop: Shop) -> None:
    http = client(shop, token=TOKEN)
    form = http.get("/login")
    signed = http.post(
        "/login", data={"token": SECRET, "csrf": csrf_of(form.text)}, follow_redirects=False
    )
    assert signed.status_code == 303
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and SECRET not in cookie
    assert http.get("/").status_code == 200
    assert http.get("/api/functions").status_code == 200  # the cookie serves the API too
    stranger = client(shop, token=TOKEN)
    form = stranger.get("/login")
    bad = stranger.post("/login", data={"token": "x" * 20, "csrf": csrf_of(form.text)})
    assert bad.status_code == 401
    assert stranger.get("/").status_code == 401


def test_a_post_without_csrf_token_or_from_another_origin_is_refused(shop: Shop) -> None:
    shop.fail(2)
    first, second = (d.id for d in shop.app.dead_letters.list())
    http = client(shop)
    token = csrf_of(http.get("/functions/charge?tab=dead-letters").text)
    assert http.post(f"/dead-letters/{first}/replay", data={}).status_code == 403
    assert http.post(f"/api/dead-letters/{first}/replay").status_code == 403
    wrong = http.post(f"/dead-letters/{first}/replay", data={"csrf": "0" * 64})
    assert wrong.status_code == 403
    foreign = http.post(
        f"/dead-letters/{first}/replay",
        data={"csrf": token},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    assert shop.app.dead_letters.count() == 2  # nothing happened
    same = http.post(
        f"/dead-letters/{first}/replay",
        data={"csrf": token},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert same.status_code == 303
    api = http.post(f"/api/dead-letters/{second}/dismiss", headers={"X-CSRF-Token": token})
    assert api.status_code == 200
    assert shop.app.dead_letters.count() == 0


def test_a_host_not_allowed_is_refused(shop: Shop) -> None:
    web = create_app(shop.app)
    assert TestClient(web, base_url="http://evil.example").get("/").status_code == 400
    assert TestClient(web, base_url="http://127.0.0.1:8787").get("/").status_code == 200


def test_a_public_bind_without_a_token_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONCEFIRE_DASHBOARD_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="without a token"):
        check_bind("0.0.0.0", load_tokens())
    check_bind("127.0.0.1", {})
    check_bind("::1", {})
    monkeypatch.setenv("ONCEFIRE_DASHBOARD_TOKEN", SECRET)
    check_bind("0.0.0.0", load_tokens())
    with pytest.raises(ConfigError, match="16 characters"):
        load_tokens("short")


def test_links_work_when_mounted_under_a_prefix(shop: Shop) -> None:
    shop.fail(1)
    outer = Starlette(
        routes=[Mount("/_oncefire", create_app(shop.app, allowed_hosts=["testserver"]))]
    )
    http = TestClient(outer)
    home = http.get("/_oncefire/")
    assert home.status_code == 200
    assert 'href="http://testserver/_oncefire/functions/charge"' in home.text
    assert "/_oncefire/static/dashboard.js" in home.text
    assert http.get("/_oncefire/static/dashboard.js").status_code == 200
    tab = http.get("/_oncefire/functions/charge?tab=dead-letters")
    [letter] = shop.app.dead_letters.list()
    replayed = http.post(
        f"/_oncefire/dead-letters/{letter.id}/replay",
        data={"csrf": csrf_of(tab.text)},
        follow_redirects=False,
    )
    assert replayed.status_code == 303
    assert replayed.headers["location"].startswith("http://testserver/_oncefire/functions/charge")


def test_without_the_app_it_shows_the_functions_the_store_knows(
    shop: Shop, store_url: str, clock: TestClock
) -> None:
    shop.fail(1)
    bare = App(store_url, clock=clock)
    try:
        http = TestClient(create_app(bare, allowed_hosts=["testserver"]))
        listed = {f["name"]: f for f in http.get("/api/functions").json()}
        assert set(listed) == {"charge", "ship"}
        assert listed["charge"]["options"] is None
        assert listed["charge"]["dead_letters"] == 1
        assert "give the dashboard the APP" in http.get("/").text
        assert http.get("/functions/charge?tab=dead-letters").status_code == 200
    finally:
        bare.close()
