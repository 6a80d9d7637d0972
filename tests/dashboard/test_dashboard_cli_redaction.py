"""`oncefire dlq show` and `dlq list --json` hide the secrets the dashboard hides: run as
subprocesses, their payloads equal what the dashboard's API answers for the same dead letter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from starlette.testclient import TestClient

from oncefire.web.dashboard import create_app
from tests.dashboard_shop import build

ONCEFIRE = str(Path(sys.executable).parent / "oncefire")
SECRETS = ("hunter2", "k-123", "Bearer abc", "c-456")


def oncefire(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    return subprocess.run(
        [ONCEFIRE, *args], capture_output=True, text=True, env=environment, timeout=60, check=False
    )


def test_dlq_show_and_list_redact_the_payload_as_the_dashboard_does(sqlite_url: str) -> None:
    shop = build(sqlite_url)
    shop.fail(
        1,
        password="hunter2",
        api_key="k-123",
        headers={"Authorization": "Bearer abc", "X-Request-Id": "r-1"},
        jar=[{"session_cookie": "c-456", "path": "/"}],
        note="kept",
    )
    [letter] = shop.app.dead_letters.list()
    http = TestClient(create_app(shop.app, allowed_hosts=["testserver"]))
    on_the_dashboard = http.get(f"/api/dead-letters/{letter.id}").json()["payload"]
    shop.app.close()
    assert on_the_dashboard["data"]["headers"] == {
        "Authorization": "[redacted]",
        "X-Request-Id": "r-1",
    }
    for args in ((), ("--full",)):
        done = oncefire("dlq", "show", str(letter.id), *args, "--store", sqlite_url)
        assert done.returncode == 0, done.stderr
        assert not [s for s in SECRETS if s in done.stdout], args
        shown = json.loads(done.stdout)["payload"]
        assert shown == on_the_dashboard, args
        body = shown["data"]
        assert (body["password"], body["api_key"]) == ("[redacted]", "[redacted]")
        assert body["jar"] == [{"session_cookie": "[redacted]", "path": "/"}]
        assert body["note"] == "kept"
    listed = oncefire("dlq", "list", "--json", "--store", sqlite_url)
    assert listed.returncode == 0, listed.stderr
    assert not [s for s in SECRETS if s in listed.stdout]
    assert [d["payload"] for d in json.loads(listed.stdout)] == [on_the_dashboard]
