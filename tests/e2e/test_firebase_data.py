"""Firebase apps over Firestore, Pub/Sub text messages and the Realtime Database under a real
`oncefire run`, on both stores: the apps of tests/e2e/apps/firebase/ written in Firebase's
spelling, ported with `oncefire port` into a temporary folder and run unchanged."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oncefire import App
from oncefire.firebase import db
from tests.e2e.cli_support import ONCEFIRE
from tests.e2e.test_firebase_http import VERIFIER, Server, call, ported, token
from tests.e2e.test_run import answer, environment, free_port, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def serve(store_url: str, tmp_path: Path) -> Iterator[Any]:
    """serve(app_name, **env) -> a Server (`oncefire run`: HTTP and workers) on the ported
    app; stopped at the end."""
    servers: list[Server] = []

    def start(name: str, **env: str) -> Server:
        main = ported(name, tmp_path)
        port = free_port()
        argv = [ONCEFIRE, "run", str(main), "--store", store_url, "--port", str(port)]
        argv += ["--no-dashboard", "--processes", "1"]
        process = subprocess.Popen(
            argv, env={**environment(), **env}, cwd=tmp_path, stderr=subprocess.PIPE, text=True
        )
        server = Server(f"http://127.0.0.1:{port}", process)
        servers.append(server)
        wait_for("the HTTP server", lambda: answer(f"{server.base}/_nowhere"))
        return server

    yield start
    for server in servers:
        if server.process.returncode is None:
            server.stop()


@pytest.fixture
def store_app(store_url: str) -> Iterator[App]:
    """An App on the test's store, to read what the served app wrote."""
    app = App(store_url)
    yield app
    app.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ONCEFIRE, *args], capture_output=True, text=True, env=environment(), timeout=120
    )


def test_notes_app_batches_transactions_and_names_each_writer(
    serve: Any, store_app: App, store_url: str, tmp_path: Path
) -> None:
    (tmp_path / "verifier.py").write_text(VERIFIER)
    server = serve("firestore_main.py", ONCEFIRE_AUTH_VERIFIER=f"{tmp_path}/verifier.py:verify")
    ada = {"Authorization": f"Bearer {token('ada')}"}
    added = [
        call(server.base, "addnote", {"text": text, "tags": tags}, **ada)
        for text, tags in [("buy milk", ["home"]), ("call bob", ["home", "work"])]
    ]
    assert [r.status_code for r in added] == [200, 200], [r.text for r in added]
    assert call(server.base, "addnote", {"text": "x"}).status_code == 401
    done = cli(
        "doc",
        "set",
        "users/bob/notes/n1",
        '{"text": "fix bike", "tags": ["home"]}',
        "--store",
        store_url,
    )
    assert done.returncode == 0, done.stderr
    documents = store_app.db

    def counted() -> object:
        home = documents.document("tags/home").get().to_dict()
        return home == {"count": 3} and len(documents.collection("audit").get()) == 3

    wait_for("the tags counted and the notes audited", counted)
    audits = {s.id: s.to_dict() for s in documents.collection("audit").get()}
    ada_ids = [r.json()["result"]["id"] for r in added]
    assert audits == {
        ada_ids[0]: {"owner": "ada", "authType": "unknown", "authId": "ada"},
        ada_ids[1]: {"owner": "ada", "authType": "unknown", "authId": "ada"},
        "n1": {"owner": "bob", "authType": "unauthenticated", "authId": None},
    }
    assert documents.document("tags/work").get().to_dict() == {"count": 1}
    assert documents.document("users/ada").get().to_dict() == {"notes": 2, "tags": ["home", "work"]}
    found = httpx.get(f"{server.base}/search", params={"tag": "home", "limit": "2"}, timeout=30)
    assert found.json() == {"total": 3, "texts": ["buy milk", "call bob"]}
    rest = httpx.get(
        f"{server.base}/search", params={"tag": "home", "after": "call bob"}, timeout=30
    )
    assert rest.json() == {"total": 3, "texts": ["fix bike"]}


def test_text_messages_reach_the_function_as_their_bytes(
    serve: Any, store_app: App, store_url: str
) -> None:
    serve("pubsub_main.py")
    text = cli("publish", "greetings", "--text", "World", "-a", "lang=en", "--store", store_url)
    as_json = cli("publish", "greetings", '{"name": "Ada"}', "--store", store_url)
    assert (text.returncode, as_json.returncode) == (0, 0), text.stderr + as_json.stderr
    both = cli("publish", "greetings", "{}", "--text", "x", "--store", store_url)
    assert both.returncode != 0 and "not both" in both.stderr and "Traceback" not in both.stderr
    greetings = store_app.db.collection("greetings")
    wait_for("two greetings", lambda: len(greetings.get()) == 2)
    by_id = {s.id: s.to_dict() for s in greetings.get()}
    assert by_id[text.stdout.strip()] == {
        "greeting": "Hello World!",
        "kind": "text",
        "attributes": {"lang": "en"},
    }
    assert by_id[as_json.stdout.strip()] == {
        "greeting": "Hello Ada!",
        "kind": "json",
        "attributes": {},
    }


def test_the_realtime_database_app_counts_and_uppercases_messages(
    serve: Any, store_app: App
) -> None:
    server = serve("db_main.py")
    keys = []
    for text in ("hello", "bye"):
        added = httpx.get(f"{server.base}/addmessage", params={"text": text}, timeout=30)
        assert added.status_code == 200, added.text
        keys.append(added.text.removeprefix("Message with ID ").removesuffix(" added."))
    assert keys == sorted(keys)  # push ids sort by time
    stats = db.reference("/stats/messages", app=store_app)
    messages = db.reference("/messages", app=store_app)

    def settled() -> object:
        copies = [m.get("uppercase") for m in (messages.get() or {}).values()]
        return stats.get() == 2 and copies == ["HELLO", "BYE"]

    wait_for("both messages uppercased and counted", settled)
    latest = httpx.get(f"{server.base}/latest", params={"n": "1"}, timeout=30)
    assert latest.json() == ["BYE"]
    messages.child(keys[0]).delete()  # a write of another process: its functions still run
    wait_for("the count after a deletion", lambda: stats.get() == 1)
    assert httpx.get(f"{server.base}/addmessage", timeout=30).status_code == 400
