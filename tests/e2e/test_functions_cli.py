"""`oncefire functions` and the unrouted events at the command line: a message published
before any function is kept and delivered once the app's worker runs."""

from __future__ import annotations

import json
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


RENAMED = APP.replace('@app.on_message("emails")', '@app.on_message("emails", name="send_v2")')


def test_a_function_renamed_in_code_at_the_command_line(run: Run, tmp_path: Path) -> None:
    """drain warns of the old name's waiting deliveries; rename moves them, and its dead
    letters; forget, rename and purge are in the audit log (issue 44, points 6 and 12)."""
    (tmp_path / "shop.py").write_text(APP)
    assert run("drain", "shop.py").returncode == 0  # registers `send`
    run("functions", "pause", "send")
    run("publish", "emails", '{"to": "a@b"}')
    run("publish", "emails", '{"to": "c@d"}')
    (tmp_path / "shop.py").write_text(RENAMED)  # the next deploy calls it send_v2
    drained = run("drain", "shop.py")
    assert drained.returncode == 0, drained.stderr
    warned = [line for line in drained.stderr.splitlines() if "does not serve" in line]
    assert len(warned) == 1 and "send (2)" in warned[0], drained.stderr
    assert_user_error(run("functions", "rename", "nobody", "send_v3"), "nobody")
    moved = run("functions", "rename", "send", "send_v3")
    assert moved.stdout.strip() == (
        "renamed send to send_v3: 2 pending deliveries and 0 dead letters moved"
    )
    run("functions", "resume", "send_v3")
    (tmp_path / "shop.py").write_text(RENAMED.replace("send_v2", "send_v3"))
    assert run("drain", "shop.py").returncode == 0
    assert sorted(sent(tmp_path)) == ["a@b", "c@d"]  # two threads: in either order
    assert run("purge").returncode == 0
    entries = json.loads(run("audit-log", "--json").stdout)
    assert [e["action"] for e in entries] == ["purge", "resume", "rename", "pause"]
    rename = entries[2]
    assert (rename["function"], rename["target"], rename["count"]) == ("send_v3", "send", 2)
    assert rename["actor"].startswith("cli")


def test_dlq_replay_of_a_forgotten_function_is_refused_unless_anyway(
    run: Run, tmp_path: Path
) -> None:
    (tmp_path / "shop.py").write_text(APP)
    assert run("drain", "shop.py").returncode == 0
    run("functions", "pause", "send")
    run("publish", "emails", '{"to": "a@b"}')
    assert (
        "1 pending deliveries are now dead letters"
        in run("functions", "forget", "send", "--yes").stdout
    )
    letter = run("dlq", "list").stdout.split()[0]
    assert_user_error(run("dlq", "replay", letter), "No function 'send' is stored", "--anyway")
    assert_user_error(run("dlq", "replay", "--all", "--yes"), "No function 'send' is stored")
    assert run("dlq", "list").stdout.split()[0] == letter  # still a dead letter
    replayed = run("dlq", "replay", letter, "--anyway")
    assert replayed.stdout.strip() == f"replayed {letter}", replayed.stderr
    assert run("drain", "shop.py").returncode == 0  # send returns: it gets the delivery
    assert sent(tmp_path) == ["a@b"]
    entries = json.loads(run("audit-log", "--json").stdout)
    assert [e["action"] for e in entries] == ["replay", "forget", "pause"]
    assert entries[1]["count"] == 1  # the pending delivery that became a dead letter
