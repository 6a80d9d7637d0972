"""`oncefire demo`: ships inside the package, runs again on the same store, and its advice
(fix the order, then replay it) works."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.cli_support import ONCEFIRE, Run
from tests.wheel_env import WheelEnv


@pytest.mark.slow
@pytest.mark.e2e
def test_the_demo_runs_twice_on_one_store_and_its_replay_advice_works(run: Run) -> None:
    first = run("demo")
    assert first.returncode == 0, first.stderr
    second = run("demo")
    assert second.returncode == 0, second.stderr
    assert "orders charged: 2 (4 in all on this store)" in second.stdout
    assert "wrote orders o4, o5 and o6" in second.stdout
    advice = second.stdout[second.stdout.index("fix the order") :].splitlines()[1:4]
    commands = [line.strip().split() for line in advice]
    assert commands[0][:4] == ["oncefire", "doc", "set", "orders/o6"]
    letter_id = commands[1][3]
    assert run("doc", "set", "orders/o6", '{"amount": 700}', "--merge").returncode == 0
    replayed = run("dlq", "replay", letter_id)
    assert replayed.returncode == 0, replayed.stderr
    drained = run("drain", "oncefire.demo.orders:app")
    assert drained.returncode == 0, drained.stderr
    assert "charging order o6: 700 cents" in drained.stdout  # the fixed order, as it is now
    summary = drained.stdout[drained.stdout.index("\n{") :]
    assert json.loads(summary) == {"attempts": 1, "outcomes": {"succeeded": 1}}
    remaining = json.loads(run("dlq", "list", "--json").stdout)
    assert [d["source"] for d in remaining] == ["orders/o3"]  # the first run's, never fixed


@pytest.mark.e2e
@pytest.mark.slow
def test_the_demo_runs_from_an_installed_wheel(wheel_env: WheelEnv, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [wheel_env.oncefire, "demo", "--store", f"sqlite:///{tmp_path}/demo.db"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env={k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "orders charged: 2" in result.stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_the_demo_outside_a_terminal_ends_after_its_story(run: Run) -> None:
    told = run("demo")  # stdin is not a terminal here: nothing to wait for
    assert told.returncode == 0, told.stderr
    assert "dashboard:" not in told.stdout
    in_ci = run("demo", env={"CI": "true"})
    assert in_ci.returncode == 0, in_ci.stderr
    assert "dashboard:" not in in_ci.stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_the_demo_serves_its_dashboard_until_ctrl_c(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [ONCEFIRE, "demo", "--store", f"sqlite:///{tmp_path}/demo.db", "--dashboard"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    process = subprocess.Popen(
        [*argv, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the demo's dashboard never answered"
                time.sleep(0.1)
        assert health.text == "ok"
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
        assert "charge_on_order" in page.text
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert f"dashboard: http://127.0.0.1:{port}/ (Ctrl-C to stop)" in stdout
    assert "Traceback" not in stderr
