"""HTTP functions served by a real uvicorn server on a loopback port, called with httpx: one
attempt per request (never retried), errors as JSON, body, time and concurrency limits, the
request id header, and Idempotency-Key with @idempotent."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from oncefire import App, PermanentError, idempotent
from oncefire.errors import ConfigError
from oncefire.events import Event
from oncefire.web.http_functions import Request, idempotency_key
from oncefire.web.server import HttpServer

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke

Serve = Callable[[App], httpx.Client]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start an HTTP server for an App on a free loopback port; a client for it."""
    servers: list[tuple[HttpServer, httpx.Client, App]] = []

    def start(app: App) -> httpx.Client:
        server = HttpServer(app, "127.0.0.1", 0)
        server.start()
        client = httpx.Client(base_url=server.url, timeout=30)
        servers.append((server, client, app))
        return client

    yield start
    for server, client, app in servers:
        client.close()
        server.stop()
        app.close()


@pytest.mark.postgres_smoke
def test_a_function_answers_text_json_and_path_params(store_url: str, serve: Serve) -> None:
    app = App(store_url)

    @app.on_request("/hello")
    def hello(event: Event) -> str:
        return f"hello {event.data.query_params.get('name', 'world')}"

    @app.on_request("/orders/{order_id}", methods=["POST"])
    def add_item(event: Event) -> dict[str, Any]:
        request: Request = event.data
        return {"order": event.params["order_id"], "got": request.get_json()}

    client = serve(app)
    text = client.get("/hello", params={"name": "ada"})
    assert (text.status_code, text.text) == (200, "hello ada")
    posted = client.post("/orders/o1", json={"sku": "x", "n": 2})
    assert posted.status_code == 200
    assert posted.json() == {"order": "o1", "got": {"sku": "x", "n": 2}}
    stats = app.stats()
    assert (stats["hello"].succeeded, stats["add_item"].succeeded) == (1, 1)


def test_the_request_id_header_is_the_event_id_of_its_attempt(store_url: str, serve: Serve) -> None:
    app = App(store_url)
    seen: list[str] = []

    @app.on_request("/ping")
    def ping(event: Event) -> None:
        seen.append(event.id)

    client = serve(app)
    first, second = client.get("/ping"), client.get("/ping")
    assert first.status_code == 204
    ids = [first.headers["X-Request-Id"], second.headers["X-Request-Id"]]
    assert ids == seen and ids[0] != ids[1]
    attempts = app.store.attempts(ids[0])
    assert [(a["function"], a["outcome"]) for a in attempts] == [("ping", "succeeded")]


def test_an_error_is_a_500_json_without_traceback_and_one_attempt(
    store_url: str, serve: Serve
) -> None:
    app = App(store_url)

    @app.on_request("/boom", methods=["POST"])
    async def boom(event: Event) -> None:
        raise ValueError("the card number 4242 leaked")

    client = serve(app)
    response = client.post("/boom", json={})
    assert response.status_code == 500
    body = response.json()
    event_id = response.headers["X-Request-Id"]
    assert body == {
        "error": "internal",
        "message": "The function raised ValueError.",
        "type": "ValueError",
        "event_id": event_id,
    }
    assert "Traceback" not in response.text and "4242" not in response.text
    attempts = app.store.attempts(event_id)
    assert [a["outcome"] for a in attempts] == ["failed"]
    assert "Traceback" in attempts[0]["error"] and "4242" in attempts[0]["error"]
    # Never retried, never a dead letter: a worker finds nothing to run.
    assert app.drain().attempts == 0
    assert len(app.store.attempts(event_id)) == 1
    assert app.dead_letters.count() == 0
    assert app.stats()["boom"].failed == 1


def test_a_permanent_error_is_a_400_with_its_message(store_url: str, serve: Serve) -> None:
    app = App(store_url)

    @app.on_request("/refund", methods=["POST"])
    def refund(event: Event) -> None:
        if "amount" not in event.data.get_json():
            raise PermanentError("amount is required")

    client = serve(app)
    response = client.post("/refund", json={})
    assert response.status_code == 400
    assert response.json()["message"] == "amount is required"
    not_json = client.post("/refund", content=b"{nope")
    assert not_json.status_code == 400
    assert not_json.json()["message"].startswith("The request body is not valid JSON")
    assert app.stats()["refund"].outcomes == {"permanent": 2}


def test_a_body_over_the_limit_is_a_413(sqlite_url: str, serve: Serve) -> None:
    app = App(sqlite_url)

    @app.on_request("/small", methods=["POST"], max_body_bytes=16)
    def small(event: Event) -> int:
        return len(event.data.content)

    @app.on_request("/default", methods=["POST"])
    def default(event: Event) -> int:
        return len(event.data.content)

    client = serve(app)
    assert client.post("/small", content=b"x" * 16).json() == 16
    over = client.post("/small", content=b"x" * 17)
    assert over.status_code == 413
    assert over.json() == {
        "error": "payload_too_large",
        "message": "The request body is over 16 bytes.",
    }

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        yield b"x" * 10
        yield b"x" * 10

    assert client.post("/small", content=chunks()).status_code == 413
    limit = 10 * 1024 * 1024
    assert client.post("/default", content=b"x" * limit).json() == limit
    assert client.post("/default", content=b"x" * (limit + 1)).status_code == 413
    assert app.stats()["small"].succeeded == 1


@pytest.mark.parametrize("is_async", [False, True])
def test_a_function_past_its_timeout_is_a_504(store_url: str, serve: Serve, is_async: bool) -> None:
    app = App(store_url)
    release = threading.Event()
    slow: Callable[[Event], object]

    if is_async:

        @app.on_request("/slow", timeout=0.2)
        async def slow(event: Event) -> str:
            await asyncio.sleep(60)  # cancelled at the timeout
            return "late"

    else:

        @app.on_request("/slow", timeout=0.2)
        def slow(event: Event) -> str:
            release.wait(60)
            return "late"

    client = serve(app)
    response = client.get("/slow")
    release.set()
    assert response.status_code == 504
    assert response.json()["error"] == "timeout"
    event_id = response.headers["X-Request-Id"]
    assert response.json()["event_id"] == event_id
    assert [a["outcome"] for a in app.store.attempts(event_id)] == ["timeout"]


def test_past_max_instances_a_request_is_a_429_with_retry_after(
    store_url: str, serve: Serve
) -> None:
    app = App(store_url)
    entered, release = threading.Event(), threading.Event()

    @app.on_request("/one-at-a-time", max_instances=1)
    def one_at_a_time(event: Event) -> str:
        entered.set()
        release.wait(60)
        return "done"

    client = serve(app)
    answers: list[httpx.Response] = []
    first = threading.Thread(target=lambda: answers.append(client.get("/one-at-a-time")))
    first.start()
    assert entered.wait(30)
    refused = client.get("/one-at-a-time")
    release.set()
    first.join(30)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["error"] == "too_many_requests"
    assert [a.status_code for a in answers] == [200]
    assert app.stats()["one_at_a_time"].succeeded == 1  # the refused request never ran


@pytest.mark.postgres_smoke
def test_an_idempotency_key_makes_two_identical_requests_one_side_effect(
    store_url: str, serve: Serve
) -> None:
    app = App(store_url)
    charges: list[int] = []

    @app.on_request("/charge", methods=["POST"])
    @idempotent(key=idempotency_key)
    def charge(event: Event) -> dict[str, Any]:
        amount = event.data.get_json()["amount"]
        charges.append(amount)
        return {"charged": amount, "charge": len(charges)}

    client = serve(app)
    headers = {"Idempotency-Key": "order-o1"}
    first = client.post("/charge", json={"amount": 500}, headers=headers)
    second = client.post("/charge", json={"amount": 500}, headers=headers)
    assert charges == [500]
    assert first.json() == second.json() == {"charged": 500, "charge": 1}
    assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]
    other = client.post("/charge", json={"amount": 500}, headers={"Idempotency-Key": "order-o2"})
    assert other.json() == {"charged": 500, "charge": 2}
    mismatch = client.post("/charge", json={"amount": 9}, headers=headers)
    assert mismatch.status_code == 400  # same key, other payload: the caller's mistake
    missing = client.post("/charge", json={"amount": 500})
    assert missing.status_code == 400
    assert "Idempotency-Key" in missing.json()["message"]
    stats = app.stats()["charge"]
    assert (stats.succeeded, stats.dedupe_hits) == (3, 1)


def test_unknown_paths_and_methods_are_json_404_and_405(sqlite_url: str, serve: Serve) -> None:
    app = App(sqlite_url)

    @app.on_request("/only-post", methods=["POST"])
    def only_post(event: Event) -> str:
        return "ok"

    client = serve(app)
    missing = client.get("/nowhere")
    assert missing.status_code == 404
    assert missing.json() == {"error": "not_found", "message": "No HTTP function at /nowhere."}
    wrong = client.get("/only-post")
    assert wrong.status_code == 405
    assert wrong.json()["error"] == "method_not_allowed"
    assert wrong.headers["Allow"] == "POST"


@pytest.mark.parametrize(
    ("path", "options", "words"),
    [
        ("no-slash", {}, "must start with '/'"),
        ("/_oncefire/x", {}, "keeps for its dashboard"),
        ("/x", {"methods": ["FETCH"]}, "Unknown HTTP method"),
        ("/x", {"methods": "POST"}, "non-empty list"),
        ("/x", {"max_body_bytes": -1}, "0 or more"),
        ("/x", {"timeout": 0}, "positive"),
    ],
)
def test_bad_http_function_options_are_refused_with_a_sentence(
    sqlite_url: str, path: str, options: dict[str, Any], words: str
) -> None:
    app = App(sqlite_url)
    with pytest.raises(ConfigError, match=words):
        app.on_request(path, **options)(lambda event: None)


def test_one_path_takes_one_function(sqlite_url: str) -> None:
    app = App(sqlite_url)
    app.on_request("/x")(lambda event: None)
    with pytest.raises(ConfigError, match="already registered on '/x'"):
        app.on_request("/x", name="other")(lambda event: None)


def test_stopping_the_server_tells_of_a_plain_function_still_running(sqlite_url: str) -> None:
    app = App(sqlite_url, shutdown_grace=0.1)
    release = threading.Event()

    @app.on_request("/stuck", timeout=0.1)
    def stuck(event: Event) -> None:
        release.wait(60)

    server = HttpServer(app, "127.0.0.1", 0)
    server.start()
    try:
        assert httpx.get(f"{server.url}/stuck", timeout=30).status_code == 504
    finally:
        still_running = server.stop()
        release.set()
        app.close()
    assert still_running == 1  # `oncefire run` ends its process then, as a stuck worker does
