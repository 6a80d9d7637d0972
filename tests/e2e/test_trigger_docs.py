"""docs/triggers.md and docs/firebase.md: every Python example, copied as written into a file
and run on each store, prints what the page says; the HTTP example answers the page's curl
commands. A broken example fails here."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from oncefire import App
from oncefire.loader import load_app
from oncefire.web.server import HttpServer

DOCS = Path(__file__).resolve().parents[2] / "docs"
TRIGGERS = DOCS / "triggers.md"
FIREBASE = DOCS / "firebase.md"

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke

# An event id (a UUIDv7, with or without dashes) in a line printed by an example, or a
# document id the Firestore client made (20 letters and digits).
EVENT_ID = re.compile(
    r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b|\b[A-Za-z0-9]{20}\b"
)


def blocks(page: Path, language: str = "python") -> list[tuple[str, str]]:
    """(heading above it, code) of each fenced block of `language` on a page, in page order."""
    heading, fence = "", None
    lines: list[str] = []
    found: list[tuple[str, str]] = []
    for line in page.read_text().splitlines(keepends=True):
        if fence is None:
            if line.startswith("```"):
                fence, lines = line[3:].strip(), []
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
        elif line.rstrip() == "```":
            if fence == language:
                found.append((heading, "".join(lines)))
            fence = None
        else:
            lines.append(line)
    return found


def keyed(page: Path) -> dict[str, str]:
    """The page's Python examples by 'heading N' (N counts the examples under one heading)."""
    examples: dict[str, str] = {}
    for heading, code in blocks(page):
        n = sum(1 for key in examples if key.rsplit(" ", 1)[0] == heading) + 1
        examples[f"{heading} {n}"] = code
    return examples


# What each example prints, line by line (in any order; an event id reads <id>). The HTTP
# example prints nothing: test_the_http_example_answers_the_curl_commands serves it.
PRINTS: dict[str, list[str]] = {
    "Documents 1": [
        "new order o1 500",
        "deleted {'amount': 500, 'status': 'paid'}",
        "u1 posts/p1 True",
        "{'order': 'o1', 'status': 'paid'}",
    ],
    "Wildcards 1": ["like l1 on posts/p1", "like l2 on posts/p1/comments/c1"],
    "Field filters 1": [
        "created, deleted, or amount changed: document.created",
        "status new -> paid",
        "status paid -> paid",
        "created, deleted, or amount changed: document.updated",
        "DrainSummary(attempts=4, outcomes={'succeeded': 4})",
    ],
    "Field filters 2": [
        "DrainSummary(attempts=1, outcomes={'succeeded': 1})",
        "{'name': 'Ada Lovelace', 'name_lower': 'ada lovelace'}",
    ],
    "Messages 1": ["settled 5 EUR", "to review: {'note': 'no amount'} from settle"],
    "Schedules 1": [],  # registering is the test: a bad cron string or zone is refused
    "Schedules 2": ["report due at 2026-01-30T08:00:00+00:00"],
    "Missed ticks 1": [
        "report of 2026-03-02 sent on 2026-03-05",
        "report of 2026-03-03 sent on 2026-03-05",
        "report of 2026-03-04 sent on 2026-03-05",
    ],
    "Ordering 1": [
        "order o0 n = 0",
        "order o1 n = 1",
        "order o2 n = 2",
        "customer ann order o0",
        "customer bob order o1",
        "customer ann order o2",
    ],
    "Rate limits 1": [
        *[f"mail to user{n}@example.com" for n in range(8)],
        "pending 4",
        "pending 2",
    ],
    "HTTP 1": [],
    "Loop protection 1": [
        "{'n': 17}",
        "bump recursive loop stopped at depth 16 (root event <id>)",
        "16",
    ],
}

FIREBASE_PRINTS: dict[str, list[str]] = {
    "Porting Firebase Cloud Functions (Python) 1": [],  # the imports resolve
    "Porting Firebase Cloud Functions (Python) 2": [
        "Uppercasing <id>: hello",
        "{'original': 'hello', 'uppercase': 'HELLO'}",
    ],
    "Callable functions 1": ["ada"],  # the shared-secret verifier recipe
    "Task queues 1": ["already queued", "backing up 2026-01-31 (retries: 0)"],
    "Custom events 1": ["VAT on orders/o1: 20"],
    "Storage 1": [
        "cats/tom.txt: 4 bytes of text/plain, metadata {'owner': 'ada'}",
        "meow",
        "cats/tom.txt deleted",
    ],
}


def run(folder: Path, name: str, code: str, store: str) -> list[str]:
    """Run `code` as `python NAME` in folder on store; the lines it printed, ids as <id>."""
    (folder / name).write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    # One attempt at a time, so two functions' prints never mix within a line.
    env.update(ONCEFIRE_STORE=store, ONCEFIRE_CONCURRENCY="1")
    result = subprocess.run(
        [sys.executable, name], capture_output=True, text=True, cwd=folder, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return [EVENT_ID.sub("<id>", line) for line in result.stdout.splitlines()]


def test_every_example_of_the_pages_is_run() -> None:
    assert list(keyed(TRIGGERS)) == list(PRINTS)
    assert list(keyed(FIREBASE)) == list(FIREBASE_PRINTS)


@pytest.mark.parametrize("example", list(PRINTS))
def test_a_triggers_example_prints_what_it_says(
    example: str, store_url: str, tmp_path: Path
) -> None:
    printed = run(tmp_path, "app.py", keyed(TRIGGERS)[example], store_url)
    assert sorted(printed) == sorted(PRINTS[example])


@pytest.mark.parametrize("example", list(FIREBASE_PRINTS))
def test_a_firebase_porting_example_prints_what_it_says(
    example: str, store_url: str, tmp_path: Path
) -> None:
    printed = run(tmp_path, "main.py", keyed(FIREBASE)[example], store_url)
    assert sorted(printed) == sorted(FIREBASE_PRINTS[example])


Request = tuple[str, str, dict[str, str], bytes | None]


def curl_requests() -> list[Request]:
    """(method, path, headers, body) of each curl line under the HTTP heading, as curl sends it."""
    requests = []
    for heading, script in blocks(TRIGGERS, "bash"):
        for line in script.splitlines():
            if heading != "HTTP" or not line.startswith("curl "):
                continue
            words = iter(shlex.split(line)[1:])
            method, url, headers, body = "GET", "", {}, None
            for word in words:
                if word == "-X":
                    method = next(words)
                elif word == "-H":
                    name, _, value = next(words).partition(": ")
                    headers[name] = value
                elif word == "-d":  # curl's default type for a -d body
                    body = next(words).encode()
                    headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
                    method = "POST" if method == "GET" else method
                elif not word.startswith("-"):
                    url = word
            requests.append((method, url.removeprefix("localhost:8080"), headers, body))
    return requests


@pytest.fixture
def http_example(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[App, httpx.Client]]:
    """The HTTP example's app, loaded as `oncefire run` loads it and served on a free port."""
    monkeypatch.setenv("ONCEFIRE_STORE", store_url)
    (tmp_path / "app.py").write_text(keyed(TRIGGERS)["HTTP 1"])
    app = load_app(str(tmp_path / "app.py"))
    server = HttpServer(app, "127.0.0.1", 0)
    server.start()
    try:
        with httpx.Client(base_url=server.url) as client:
            yield app, client
    finally:
        server.stop()
        app.close()
        sys.modules.pop("oncefire_user_app", None)


@pytest.mark.postgres_smoke
def test_the_http_example_answers_the_curl_commands(
    http_example: tuple[App, httpx.Client],
) -> None:
    app, client = http_example

    def send(request: Request) -> httpx.Response:
        method, path, headers, body = request
        return client.request(method, path, headers=headers, content=body)

    hello, item, charge = curl_requests()
    answered = send(hello)
    assert (answered.status_code, answered.text) == (200, "hello ada")
    assert answered.headers["x-request-id"]
    added = send(item)
    assert added.status_code == 200, added.text
    doc = app.db.document(f"orders/o1/items/{added.json()['id']}").get()
    assert doc.to_dict() == {"sku": "x"}
    first, again = send(charge), send(charge)  # a client retrying with the same key
    assert first.status_code == again.status_code == 200, first.text
    assert first.json() == again.json() == {"charged": 5}
    assert app.stats()["charge"].dedupe_hits == 1  # the repeat got the stored result
