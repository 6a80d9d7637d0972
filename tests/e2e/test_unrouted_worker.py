"""A real `oncefire worker` process: a message published before it started is delivered, a
worker warns about stored functions it does not serve, and writes made after its SQLite file
was deleted under it still reach it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oncefire import App
from tests.e2e.cli_support import ONCEFIRE, poll_until

pytestmark = pytest.mark.e2e

APP = """
from pathlib import Path
from oncefire import App

app = App()

@app.on_message("emails")
def send(event):
    with Path("sent.txt").open("a") as out:
        out.write(event.data.data["to"] + "\\n")
"""
DEADLINE = 30.0


def wait_for(what: str, check: Callable[[], object]) -> None:
    """Poll check() until it is truthy; fail after DEADLINE."""
    poll_until(what, check, DEADLINE)


def environment(tmp_path: Path) -> dict[str, str]:
    """A clean environment naming tmp_path's SQLite store, with fast sweeps."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env.update(ONCEFIRE_STORE=f"sqlite:///{tmp_path}/shop.db", ONCEFIRE_SWEEP_EVERY="0.3")
    return env


@pytest.fixture
def oncefire(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start `oncefire ARGS` in tmp_path on its SQLite store, with fast sweeps."""
    started: list[subprocess.Popen[bytes]] = []
    env = environment(tmp_path)

    def start(*args: str, log: str = "worker.log") -> subprocess.Popen[bytes]:
        with open(tmp_path / log, "wb") as out:
            proc = subprocess.Popen(
                [ONCEFIRE, *args], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def sent(tmp_path: Path) -> list[str]:
    path = tmp_path / "sent.txt"
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
def test_writes_after_the_sqlite_file_was_deleted_reach_the_running_worker(
    tmp_path: Path, oncefire: Callable[..., subprocess.Popen[bytes]]
) -> None:
    (tmp_path / "shop.py").write_text(APP)
    assert oncefire("publish", "emails", '{"to": "early"}', log="p1.log").wait(60) == 0
    oncefire("worker", "shop.py")
    log = tmp_path / "worker.log"
    wait_for("the early message", lambda: sent(tmp_path) == ["early"])
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"shop.db{suffix}").unlink(missing_ok=True)
    wait_for("the worker to reopen", lambda: "deleted or replaced" in log.read_text())
    assert oncefire("publish", "emails", '{"to": "late"}', log="p2.log").wait(60) == 0
    wait_for("the late message", lambda: sent(tmp_path) == ["early", "late"])
    errors = [line for line in log.read_text().splitlines() if " ERROR " in line]
    assert len(errors) == 1, log.read_text()


# App file A registers `send` and publishes two messages for it; app file B serves only `bill`.
APP_A = (
    APP
    + """
if __name__ == "__main__":
    app.publish("emails", {"to": "a1"})
    app.publish("emails", {"to": "a2"})
"""
)
APP_B = """
from pathlib import Path
from oncefire import App

app = App()

@app.on_message("invoices")
def bill(event):
    Path("billed.txt").write_text(event.data.data["to"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("processes", ["1", "2"])  # a supervisor says it once for all
def test_a_worker_warns_at_start_about_a_stored_function_it_does_not_serve(
    tmp_path: Path, oncefire: Callable[..., subprocess.Popen[bytes]], processes: str
) -> None:
    (tmp_path / "a.py").write_text(APP_A)
    (tmp_path / "b.py").write_text(APP_B)
    env = environment(tmp_path)
    subprocess.run([sys.executable, "a.py"], cwd=tmp_path, env=env, check=True, timeout=60)
    assert oncefire("publish", "invoices", '{"to": "b1"}', log="p.log").wait(60) == 0
    reader = App(env["ONCEFIRE_STORE"])
    pending = {row.name: row.pending for row in reader.functions.list()}
    reader.close()
    assert pending["send"] == 2  # due deliveries of a function B lacks

    worker = oncefire("worker", "b.py", "--processes", processes)
    billed = tmp_path / "billed.txt"
    # The worker warns before it serves anything, so once bill has run the warning is logged;
    # the log is complete once the worker has exited.
    wait_for("b's own delivery", billed.exists)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    log = (tmp_path / "worker.log").read_text()
    [warning] = [line for line in log.splitlines() if "does not serve" in line]
    assert " WARNING " in warning
    assert "does not serve, with pending deliveries: send (2);" in warning, warning
    assert "bill" not in warning
    assert not (tmp_path / "sent.txt").exists()  # B ran nothing of send
