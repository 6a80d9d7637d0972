"""The supervisor of `oncefire worker` as a real process sent real signals: it starts at most
4 worker processes a CPU unless forced, stops within the shutdown grace when SIGTERM or SIGINT
comes while its workers are still starting, and a worker whose supervisor died (SIGKILL)
exits by itself. Each process that loads the app leaves a mark with its pid, so the test
knows the workers even once they have lost their parent."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oncefire.processes.supervisor import cpu_count
from tests.e2e.cli_support import ONCEFIRE, assert_user_error, poll_until

pytestmark = pytest.mark.e2e

APP = Path(__file__).parent / "apps" / "slow_import.py"
GRACE = 5.0
DEADLINE = 60.0


def is_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class Supervisor:
    """One `oncefire worker` command on a fresh SQLite store, and the processes it started."""

    def __init__(
        self, tmp: Path, *args: str, slow_import: float = 0.0, slow_here: float = 0.0
    ) -> None:
        self.marks = tmp / "marks"
        self.marks.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
        env.update(
            ONCEFIRE_STORE=f"sqlite:///{tmp}/oncefire.db",
            ONCEFIRE_SHUTDOWN_GRACE=str(GRACE),
            E2E_DIR=str(self.marks),
            SLOW_IMPORT=str(slow_import),
            SLOW_SUPERVISOR_IMPORT=str(slow_here),
        )
        self.log_path = tmp / "worker.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [ONCEFIRE, "worker", str(APP), *args],
                env=env,
                cwd=tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def workers(self) -> list[int]:
        """The pids of the worker processes that began to load the app (not the supervisor)."""
        pids = [int(path.name.split("-")[1]) for path in self.marks.glob("loading-*")]
        return [pid for pid in pids if pid != self.proc.pid]

    def alive(self) -> list[int]:
        return [pid for pid in self.workers() if is_alive(pid)]

    def close(self) -> None:
        for pid in self.alive():
            os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Supervisor]]:
    started: list[Supervisor] = []

    def run(*args: str, slow_import: float = 0.0, slow_here: float = 0.0) -> Supervisor:
        supervisor = Supervisor(tmp_path, *args, slow_import=slow_import, slow_here=slow_here)
        started.append(supervisor)
        return supervisor

    yield run
    for supervisor in started:
        supervisor.close()


def test_more_than_four_processes_a_cpu_are_refused_in_one_line(tmp_path: Path) -> None:
    too_many = 4 * cpu_count() + 1
    for command in ("worker", "run"):
        result = subprocess.run(
            [ONCEFIRE, command, str(APP), "--processes", str(too_many)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "E2E_DIR": str(tmp_path)},
            timeout=60,
        )
        assert_user_error(result, f"--processes {too_many}", "--force")
        assert not list(tmp_path.glob("loading-*"))  # refused before the app was loaded


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_workers_start_ends_everything_within_the_grace(
    start: Callable[..., Supervisor], signum: int
) -> None:
    # Forced past the bound, and each worker takes a minute to import the app.
    processes = 4 * cpu_count() + 1
    supervisor = start("--processes", str(processes), "--force", slow_import=60)
    poll_until("a worker process loading the app", supervisor.workers, DEADLINE)
    signalled = time.monotonic()
    supervisor.proc.send_signal(signum)
    assert supervisor.proc.wait(DEADLINE) == 0, supervisor.log()
    assert time.monotonic() - signalled < GRACE, supervisor.log()
    assert supervisor.alive() == []
    assert len(supervisor.workers()) <= processes


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_supervisor_loads_the_app_stops_it_at_once(
    start: Callable[..., Supervisor], signum: int
) -> None:
    supervisor = start("--processes", "2", slow_here=60)
    poll_until(
        "the supervisor loading the app", lambda: list(supervisor.marks.glob("loading-*")), DEADLINE
    )
    signalled = time.monotonic()
    supervisor.proc.send_signal(signum)
    assert supervisor.proc.wait(DEADLINE) == 0, supervisor.log()
    assert time.monotonic() - signalled < GRACE, supervisor.log()
    assert "stopped while loading the app" in supervisor.log()
    assert "Traceback" not in supervisor.log()
    assert supervisor.workers() == []


def test_a_worker_whose_supervisor_was_killed_while_it_loaded_exits(
    start: Callable[..., Supervisor],
) -> None:
    supervisor = start("--processes", "2", slow_import=3)
    poll_until("2 worker processes loading", lambda: len(supervisor.workers()) == 2, DEADLINE)
    supervisor.proc.kill()
    supervisor.proc.wait()
    # They exit within a few seconds, though loading the app takes them 3 s more.
    poll_until("the orphaned workers to exit", lambda: supervisor.alive() == [], 3 * GRACE)


def test_a_serving_worker_whose_supervisor_was_killed_exits(
    start: Callable[..., Supervisor],
) -> None:
    supervisor = start("--processes", "2")
    poll_until("2 workers serving", lambda: supervisor.log().count(" serving ") >= 2, DEADLINE)
    workers = supervisor.alive()
    assert len(workers) == 2
    supervisor.proc.kill()
    supervisor.proc.wait()
    poll_until("the orphaned workers to exit", lambda: supervisor.alive() == [], GRACE)
