"""Issue 11 with real `oncefire worker` processes: a timed-out attempt never overlaps its own
retry, its @idempotent lease or its max_instances slot (point 23); a killed worker's deliveries
that never started are not charged an attempt (point 24)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from tests.e2e.test_workers import FAST, Workers, start, wait_for

pytestmark = pytest.mark.e2e
__all__ = ["start"]  # the fixture


def intervals(workers: Workers) -> dict[int, tuple[float, float]]:
    """(start, end) of each attempt, by attempt number, from the functions' ledger."""
    seen: dict[int, dict[str, float]] = {}
    for line in (workers.marks / "ledger").read_text().splitlines():
        what, _pid, attempt, at = line.split()
        seen.setdefault(int(attempt), {})[what] = float(at)
    return {n: (t["start"], t["end"]) for n, t in seen.items() if "start" in t and "end" in t}


@pytest.mark.slow
def test_a_timed_out_attempt_never_runs_beside_its_retry(start: Callable[..., Workers]) -> None:
    workers = start(2, FAST, "--concurrency", "2")
    # One commit for both, so one process leases both: the slow one keeps that process alive
    # (its graceful stop waits for it) long after the overrun's timeout.
    with workers.app.store.batch():
        slow_id = workers.app.publish("slow", {"sleep": 4})
        event_id = workers.app.publish("overrun", {"sleep": 2.5})
    assert workers.started(slow_id, 1) == workers.started(event_id, 1)
    attempts = workers.settled(event_id)

    assert [a["outcome"] for a in attempts] == ["timeout", "succeeded"]
    wait_for("both attempts to end", lambda: len(intervals(workers)) == 2)
    ran = intervals(workers)
    assert ran[1][1] <= ran[2][0], f"attempt 2 started before attempt 1 ended: {ran}"
    effects = (workers.marks / "effects").read_text().split()
    assert effects == [event_id], "the @idempotent effect ran once"
    assert workers.stop() == 0


@pytest.mark.slow
def test_a_killed_worker_charges_only_the_attempt_it_started(
    start: Callable[..., Workers],
) -> None:
    workers = start(1, FAST, "--concurrency", "1")
    with workers.app.store.batch():  # short attempts first: the worker learns to lease ahead
        warm = [workers.app.publish("slow", {"sleep": 0}) for _ in range(20)]
    for event_id in warm:
        workers.settled(event_id)
    with workers.app.store.batch():
        blocker = workers.app.publish("slow", {"sleep": 60})
        queued = [workers.app.publish("slow", {"sleep": 0}) for _ in range(10)]
    os.kill(workers.started(blocker, 1), signal.SIGKILL)
    assert workers.running() > 1, "the killed worker held queued deliveries"

    assert [a["outcome"] for a in workers.settled(blocker)] == ["crashed", "succeeded"]
    for event_id in queued:
        assert [a["outcome"] for a in workers.settled(event_id)] == ["succeeded"]
        assert workers.state(event_id) == ("succeeded", 1)
    assert workers.stop() == 0
