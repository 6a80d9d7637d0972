"""What every peer provides to run_peer.py: reset, workers, enqueue, a backlog count, and
the commits its workers make."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent
sys.path.insert(0, str(PEERS.parent))

from benchlib import WORK, running  # noqa: E402

PROCESSES = 2
THREADS = 8  # per process, for the peers that run threads (oncefire's default too)
SLOTS = PROCESSES * THREADS  # execution slots every system gets
# Seconds a peer's workers get to stop after SIGTERM before SIGKILL. They are stopped only
# once their measurement is over, and the queue is reset before the next one, so a slow
# graceful shutdown (Celery's warm shutdown with a backlog left took the whole 20 s) only
# wastes time.
STOP_GRACE = 2.0


class Peer:
    """One queue: how to reset it, run its workers, enqueue and count its backlog."""

    name = ""
    label = ""  # the system's name on the page
    broker = ""  # what stores its queue
    config = ""
    setup = ""  # its processes and threads, in short
    packages: tuple[str, ...] = ()  # whose versions the page gives
    # What a worker's crash runs again (or loses), for the page.
    crash = ""

    def reset(self) -> None:
        raise NotImplementedError

    def worker_commands(self) -> list[list[str]]:
        raise NotImplementedError

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        raise NotImplementedError

    def enqueue_latency(self, key: str) -> None:
        raise NotImplementedError

    def backlog(self) -> int:
        """Jobs not yet done, from a count the queue answers without a scan."""
        raise NotImplementedError

    def has_work(self) -> bool:
        """Whether any job is left: an existence check, cheap however large the backlog."""
        return self.backlog() > 0

    def prepare(self) -> None:
        """Set-up after the backlog is enqueued, before the workers start."""

    def commits(self) -> Any:
        """A commit counter (bench/commits.py) for the store, or None (Redis: no commits)."""
        return None

    def own_transactions(self) -> int:
        """Transactions the benchmark's own connection ran on the store since quiesce()."""
        return 0

    def quiesce(self) -> None:
        """Close the benchmark's own connections to the store, so that the store's counts
        include everything they did (a PostgreSQL backend reports as it exits)."""

    def close(self) -> None:
        pass

    @contextmanager
    def workers(
        self, what: str, env: dict[str, str] | None = None, first_path: str = ""
    ) -> Iterator[None]:
        """The peer's worker processes, stopped with SIGTERM on exit."""
        WORK.mkdir(parents=True, exist_ok=True)
        commands = self.worker_commands()
        logs = [WORK / f"peer-{self.name}-{what}-{i}.log" for i in range(len(commands))]
        path = ":".join(p for p in (first_path, str(PEERS), str(PEERS.parent)) if p)
        with _all_running(commands, logs, {"PYTHONPATH": path, **(env or {})}):
            yield


@contextmanager
def _all_running(
    commands: list[list[str]], logs: list[Path], env: dict[str, str]
) -> Iterator[None]:
    if not commands:
        yield
        return
    with (
        running(commands[0], env=env, log_path=logs[0], grace=STOP_GRACE),
        _all_running(commands[1:], logs[1:], env),
    ):
        yield
