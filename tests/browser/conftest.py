"""Browser tests: the dashboard served by uvicorn in a thread, driven by Debian's Chromium."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncefire.testing import TestClock
from oncefire.web.dashboard import create_app
from tests.dashboard_shop import Shop, build

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require_chromium() -> None:
    """Skip (or, with CI set, fail) when Debian's Chromium is not installed."""
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is not installed (apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"Chromium is required in CI: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """An ASGI app served by uvicorn on a loopback port, in a thread."""

    def __init__(self, web: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(web, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:  # waits for a condition, not for time to pass
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def shop(store_url: str, clock: TestClock) -> Iterator[Shop]:
    shop = build(store_url, clock)
    yield shop
    shop.app.close()


@pytest.fixture
def dashboard(shop: Shop) -> Iterator[Served]:
    """The shop's dashboard, its badge refreshing every 0.2 s instead of 15 s."""
    served = Served(create_app(shop.app, refresh_seconds=0.2))
    yield served
    served.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    yield page
    context.close()
