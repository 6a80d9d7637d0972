"""`oncefire events show`, `oncefire audit-log` and `oncefire dashboard`, run as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oncefire import App
from tests.dashboard_shop import build

ONCEFIRE = str(Path(sys.executable).parent / "oncefire")


def oncefire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    environment.update(env or {})
    return subprocess.run(
        [ONCEFIRE, *args], capture_output=True, text=True, env=environment, timeout=60, check=False
    )


def test_events_show_prints_the_payload_redacted_and_every_attempt(sqlite_url: str) -> None:
    shop = build(sqlite_url)
    shop.fail(1, password="hunter2")
    [letter] = shop.app.dead_letters.list()
    shop.app.close()
    done = oncefire("events", "show", letter.event_id, "--store", sqlite_url)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["data"]["data"]["password"] == "[redacted]"
    assert "hunter2" not in done.stdout
    [delivery] = shown["deliveries"]
    assert delivery["state"] == "dead"
    assert [a["outcome"] for a in delivery["attempts"]] == ["failed"]
    missing = oncefire("events", "show", "nope", "--store", sqlite_url)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == (
        "Error: No event 'nope' is stored (or it was purged)."
    )


def test_audit_log_lists_operator_actions(sqlite_url: str) -> None:
    shop = build(sqlite_url)
    shop.fail(2)
    first = shop.app.dead_letters.list()[0]
    shop.app.operators.dismiss(first.id, actor="alice")
    shop.app.operators.replay_all("charge", actor="bob")
    shop.app.close()
    done = oncefire("audit-log", "--store", sqlite_url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "bob  replay_all  charge  all  count=1" in lines[0]
    assert f"alice  dismiss  charge  {first.id}  count=1" in lines[1]
    entries = json.loads(oncefire("audit-log", "--json", "--store", sqlite_url).stdout)
    assert [e["actor"] for e in entries] == ["bob", "alice"]


def test_dashboard_refuses_a_public_address_without_a_token(sqlite_url: str) -> None:
    done = oncefire("dashboard", "--host", "0.0.0.0", "--store", sqlite_url)
    assert done.returncode == 1
    assert "without a token" in done.stderr and "Traceback" not in done.stderr


def test_dashboard_serves_beyond_loopback_with_a_token_file(
    sqlite_url: str, tmp_path: Path
) -> None:
    import socket
    import time
    import urllib.error
    import urllib.request

    (tmp_path / "tokens").write_text("ops=a-token-of-twenty-chars\n")
    App(sqlite_url).store.close()  # the dashboard reads a store; it never creates one
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    argv = [ONCEFIRE, "dashboard", "--store", sqlite_url, "--host", "0.0.0.0", "--port",
            str(port), "--token-file", str(tmp_path / "tokens")]  # fmt: skip
    server = subprocess.Popen(argv, env=environment, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # waits until the server answers, not for time to pass
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
                    assert answer.status == 200
                    break
            except urllib.error.URLError:
                assert server.poll() is None, server.stderr and server.stderr.read()
                assert time.monotonic() < deadline
                time.sleep(0.05)
        try:
            urllib.request.urlopen(f"{base}/api/functions", timeout=5)
            raise AssertionError("answered without the token")
        except urllib.error.HTTPError as refused:
            assert refused.code == 401
        bearer = {"Authorization": "Bearer a-token-of-twenty-chars"}
        request = urllib.request.Request(f"{base}/api/functions", headers=bearer)
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert json.loads(answer.read()) == []
    finally:
        server.terminate()
        server.communicate(timeout=30)


@pytest.mark.slow
def test_cli_dead_letter_and_brake_actions_are_in_the_audit_log(sqlite_url: str) -> None:
    shop = build(sqlite_url)
    shop.fail(5)
    first, second, *_ = (d.id for d in reversed(shop.app.dead_letters.list()))
    shop.app.close()
    for args in (
        ("dlq", "replay", str(first)),
        ("dlq", "dismiss", str(second)),
        ("dlq", "replay", "--all", "--error", "declined", "-y"),
        ("dlq", "dismiss", "--all", "-y"),
        ("functions", "pause", "charge"),
        ("functions", "resume", "charge"),
    ):
        done = oncefire(*args, "--store", sqlite_url)
        assert done.returncode == 0, (args, done.stderr)
    entries = json.loads(oncefire("audit-log", "--json", "--store", sqlite_url).stdout)
    shown = [(e["action"], e["function"], e["target"], e["count"]) for e in reversed(entries)]
    assert shown == [
        ("replay", "charge", str(first), 1),
        ("dismiss", "charge", str(second), 1),
        ("replay_all", None, None, 3),
        ("dismiss_all", None, None, 0),
        ("pause", "charge", "charge", 1),
        ("resume", "charge", "charge", 1),
    ]
    assert {e["actor"].split(":")[0] for e in entries} == {"cli"}
    assert entries[3]["detail"] == {"error_contains": "declined"}


def test_cli_lists_and_replays_one_error_group_as_the_dashboard_does(sqlite_url: str) -> None:
    shop = build(sqlite_url)
    shop.fail(2, error="card refused")
    shop.fail(1, error="card refused twice")  # contains the other group's text
    shop.app.close()
    group = "ConnectionError: card refused"
    listed = oncefire("dlq", "list", "--group", group, "--json", "--store", sqlite_url)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 2
    done = oncefire("dlq", "replay", "--all", "--group", group, "-y", "--store", sqlite_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "replayed 2" and "replayed 2 of 2" in done.stderr
    log = oncefire("audit-log", "--store", sqlite_url).stdout
    assert f"replay_all  -  group {group}  count=2" in log
    app = App(sqlite_url)
    [left] = app.dead_letters.list()
    app.close()
    assert (left.error or "").startswith("ConnectionError: card refused twice")
