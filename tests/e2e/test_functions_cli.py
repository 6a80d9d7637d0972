"""`oncefire functions` and the unrouted events at the command line: a message published
before any function is kept and delivered once the app's worker runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli_support import Run, assert_user_error

APP = """
from pathlib import Path
from oncefire import App

app = App()

@app.on_message("emails")
def send(event):
    with Path("sent.txt").open("a") as out:
        out.write(event.data.data["to"] + "\\n")
"""


def sent(tmp_path: Path) -> list[str]:
    path = tmp_path / "sent.txt"
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
def test_a_message_published_before_any_function_is_kept_and_delivered(
    run: Run, tmp_path: Path
) -> None:
    assert run("migrate").returncode == 0
    published = run("publish", "emails", '{"to": "a@b"}')
    assert published.returncode == 0
    assert "kept; no function subscribes to topic emails yet" in published.stderr
    assert "unrouted: 1 event(s)" in run("stats").stdout
    (tmp_path / "shop.py").write_text(APP)
    drained = run("drain", "shop.py")
    assert drained.returncode == 0, drained.stderr
    assert sent(tmp_path) == ["a@b"]
    assert "unrouted: 0 event(s)" in run("stats").stdout


@pytest.mark.slow
def test_functions_list_pause_resume(run: Run, tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(APP)
    assert run("drain", "shop.py").returncode == 0  # registers `send`
    assert run("functions", "pause", "send").stdout.strip() == "paused send"
    run("publish", "emails", '{"to": "a@b"}')
    assert run("drain", "shop.py").returncode == 0
    assert sent(tmp_path) == []
    listed = run("functions", "list").stdout.splitlines()
    assert listed[1].split()[:3] == ["send", "message", "emails"]
    assert "1  yes (paused)" in listed[1]
    assert run("functions").stdout.splitlines()[1].split()[:3] == ["send", "message", "emails"]
    assert run("functions", "resume", "send").stdout.strip() == "resumed send"
    assert run("drain", "shop.py").returncode == 0
    assert sent(tmp_path) == ["a@b"]


@pytest.mark.slow
def test_functions_forget_asks_then_makes_dead_letters(run: Run, tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(APP)
    assert run("drain", "shop.py").returncode == 0
    run("publish", "emails", '{"to": "a@b"}')
    refused = run("functions", "forget", "send", input="n\n")
    assert refused.returncode != 0 and "1 pending deliveries" in refused.stdout
    assert "send" in run("functions", "list").stdout
    forgot = run("functions", "forget", "send", "--yes")
    assert "forgot send: 1 pending deliveries are now dead letters" in forgot.stdout
    assert "function forgotten" in run("dlq", "list").stdout
    assert run("functions", "list").stdout.strip() == "no stored functions"
    assert_user_error(run("functions", "forget", "send", "--yes"), "No stored function")
    assert_user_error(run("functions", "pause", "nobody"), "No stored function")
