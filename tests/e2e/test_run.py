"""`oncefire run` as a real process: worker processes and the HTTP server in one command, on
the ported Firebase sample as it is; a port that cannot be bound is one line and an exit."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from oncefire import App

pytestmark = pytest.mark.e2e

ONCEFIRE = str(Path(sys.executable).parent / "oncefire")
SAMPLE = Path(__file__).parent / "apps" / "firebase_main.py"
DEADLINE = 60.0


def wait_for(what: str, check: Callable[[], object]) -> object:
    """Poll check() until it returns something truthy; fail after DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {DEADLINE:.0f} s waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment() -> dict[str, str]:
    """The test's environment without ONCEFIRE_* settings, with a short shutdown grace."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env["ONCEFIRE_SHUTDOWN_GRACE"] = "5"
    return env


def answer(url: str) -> httpx.Response | None:
    """The server's answer, or None while nothing listens."""
    try:
        return httpx.get(url, timeout=5)
    except httpx.TransportError:
        return None


def test_run_serves_http_and_runs_workers_for_a_firebase_main_py(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/run.db"
    port = free_port()
    argv = [ONCEFIRE, "run", str(SAMPLE), "--store", store, "--port", str(port)]
    argv += ["--processes", "2"]
    process = subprocess.Popen(argv, env=environment(), cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for("the HTTP server", lambda: answer(f"{base}/nowhere"))
        added = httpx.get(f"{base}/addmessage", params={"text": "run"}, timeout=30)
        assert added.status_code == 200, added.text
        doc_id = added.text.removeprefix("Message with ID ").removesuffix(" added.")
        app = App(store)
        ref = app.db.document(f"messages/{doc_id}")
        wait_for("a worker process to uppercase it", lambda: ref.get().get("uppercase"))
        assert ref.get().to_dict() == {"original": "run", "uppercase": "RUN"}
        assert app.stats()["addmessage"].succeeded == 1
        app.close()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert "Traceback" not in stderr.decode()


def test_run_on_a_port_in_use_is_one_line_and_an_exit(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [ONCEFIRE, "run", str(SAMPLE), "--store", f"sqlite:///{tmp_path}/x.db"]
        result = subprocess.run(
            [*argv, "--port", str(port)],
            env=environment(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    # The app's load logs its ignored Firebase options; then the error, in one line.
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: Cannot listen on 127.0.0.1:") and str(port) in last


def test_run_serves_the_dashboard_beside_the_http_functions_on_one_port(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/run.db"
    port = free_port()
    argv = [ONCEFIRE, "run", str(SAMPLE), "--store", store, "--port", str(port)]
    process = subprocess.Popen(argv, env=environment(), cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for("the HTTP server", lambda: answer(f"{base}/_oncefire/healthz"))
        assert httpx.get(f"{base}/_oncefire/healthz").text == "ok"
        added = httpx.get(f"{base}/addmessage", params={"text": "both"}, timeout=30)
        assert added.status_code == 200, added.text
        page = httpx.get(f"{base}/_oncefire/", timeout=30)
        assert page.status_code == 200 and "makeuppercase" in page.text
        links = re.findall(r'(?:href|src)="([^"?]+)', page.text)
        assert links and all(link.startswith(f"{base}/_oncefire/") for link in links), links
        for link in set(links):  # the stylesheet, the script, every function's page
            followed = httpx.get(link, timeout=30)
            assert followed.status_code == 200, (link, followed.text)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert f"dashboard on http://127.0.0.1:{port}/_oncefire/" in stderr.decode()


def test_run_without_the_dashboard_serves_only_the_http_functions(tmp_path: Path) -> None:
    port = free_port()
    argv = [ONCEFIRE, "run", str(SAMPLE), "--store", f"sqlite:///{tmp_path}/run.db"]
    argv += ["--port", str(port), "--no-dashboard"]
    process = subprocess.Popen(argv, env=environment(), cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for("the HTTP server", lambda: answer(f"{base}/nowhere"))
        assert httpx.get(f"{base}/_oncefire/healthz").status_code == 404
        assert httpx.get(f"{base}/addmessage", params={"text": "x"}, timeout=30).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0


def test_run_beyond_loopback_without_a_token_refuses_before_serving(tmp_path: Path) -> None:
    argv = [ONCEFIRE, "run", str(SAMPLE), "--store", f"sqlite:///{tmp_path}/x.db"]
    result = subprocess.run(
        [*argv, "--host", "0.0.0.0", "--port", str(free_port())],
        env=environment(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "without a token" in last and "--no-dashboard" in last
