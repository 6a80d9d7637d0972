"""A slow dashboard request never delays the HTTP functions served beside it: the dashboard
makes its store calls in a thread pool, off the server's event loop (issue 46, point 7)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.web.dashboard import server as dashboard_server
from oncefire.web.dashboard import views
from oncefire.web.dashboard.server import PREFIX, mount
from oncefire.web.dashboard.threads import STORE_THREADS
from oncefire.web.server import HttpServer

pytestmark = pytest.mark.sqlite_only  # above the store
SLOW_READ_LIMIT = 5.0  # seconds the slow read waits for the HTTP function before giving up


@pytest.fixture
def served(store_url: str) -> Iterator[tuple[App, HttpServer]]:
    """An app with one HTTP function, served with the dashboard mounted beside it, as
    `oncefire run` serves them."""
    app = App(store_url)

    @app.on_request("/ping")
    def ping(event: Event) -> str:
        return "pong"

    @app.on_message("orders")
    def charge(event: Event) -> None:
        pass

    server = HttpServer(app, "127.0.0.1", 0, [mount(app, "127.0.0.1")])
    server.start()
    yield app, server
    server.stop()
    app.close()


class SlowRead:
    """A read made slow on purpose: it holds its thread until the HTTP function answered (or
    SLOW_READ_LIMIT passed), as a long store query would; `order` records what happened."""

    def __init__(self, read: Callable[..., Any]) -> None:
        self.read = read
        self.order: list[str] = []
        self.started = threading.Event()
        self.answered = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.order.append("slow read started")
        self.started.set()
        self.answered.wait(SLOW_READ_LIMIT)
        self.order.append("slow read ended")
        return self.read(*args, **kwargs)


def csrf_of(server: HttpServer) -> str:
    """The CSRF token of a request without a session (what the sign-in form carries)."""
    page = httpx.get(f"{server.url}{PREFIX}/login", timeout=30).text
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert match, "no CSRF field on the sign-in page"
    return match.group(1)


Slowed = Callable[[App], tuple[object, str]]  # the object and attribute of the read to slow
CASES: list[tuple[str, str, Slowed]] = [
    ("GET", "/api/functions", lambda app: (views, "functions")),
    ("GET", "/", lambda app: (views, "functions")),
    ("GET", "/metrics", lambda app: (dashboard_server, "exposition")),
    ("POST", "/api/functions/charge/pause", lambda app: (app.operators, "pause")),
]


@pytest.mark.parametrize(("method", "path", "slowed"), CASES, ids=[c[1] for c in CASES])
def test_a_slow_dashboard_request_does_not_delay_an_http_function(
    served: tuple[App, HttpServer],
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    path: str,
    slowed: Slowed,
) -> None:
    app, server = served
    headers = {"x-csrf-token": csrf_of(server)} if method == "POST" else {}
    target, read = slowed(app)
    slow = SlowRead(getattr(target, read))
    monkeypatch.setattr(target, read, slow)
    dashboard: list[int] = []

    def ask_dashboard() -> None:
        url = f"{server.url}{PREFIX}{path}"
        response = httpx.request(method, url, headers=headers, timeout=30)
        slow.order.append("dashboard answered")
        dashboard.append(response.status_code)

    asking = threading.Thread(target=ask_dashboard)
    asking.start()
    try:
        assert slow.started.wait(30), "the dashboard request never reached its read"
        pong = httpx.get(f"{server.url}/ping", timeout=30)
        slow.order.append("http function answered")
    finally:
        slow.answered.set()
        asking.join(30)
    assert pong.status_code == 200 and pong.text == "pong"
    assert dashboard == [200]
    assert slow.order == [
        "slow read started",
        "http function answered",
        "slow read ended",
        "dashboard answered",
    ]


class HeldReads:
    """A read that holds every caller until released, counting how many are inside at once."""

    def __init__(self, read: Callable[..., Any], full: int) -> None:
        self.read = read
        self.full = full
        self.inside = self.most = 0
        self.lock = threading.Lock()
        self.is_full = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            if self.inside >= self.full:
                self.is_full.set()
        self.release.wait(SLOW_READ_LIMIT)
        with self.lock:
            self.inside -= 1
        return self.read(*args, **kwargs)


def test_dashboard_requests_past_its_threads_wait_and_http_functions_still_answer(
    served: tuple[App, HttpServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = served
    held = HeldReads(views.functions, STORE_THREADS)
    monkeypatch.setattr(views, "functions", held)
    answers: list[int] = []

    def ask_dashboard() -> None:
        answers.append(httpx.get(f"{server.url}{PREFIX}/api/functions", timeout=30).status_code)

    asking = [threading.Thread(target=ask_dashboard) for _ in range(STORE_THREADS + 2)]
    for thread in asking:
        thread.start()
    try:
        assert held.is_full.wait(30), "the dashboard's threads never all reached the read"
        pong = httpx.get(f"{server.url}/ping", timeout=30)
        most = held.most
    finally:
        held.release.set()
        for thread in asking:
            thread.join(30)
    assert pong.text == "pong"
    assert most == STORE_THREADS  # the other two waited for a thread, holding no connection
    assert answers == [200] * (STORE_THREADS + 2)
