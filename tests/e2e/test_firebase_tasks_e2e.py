"""Task queue functions across real processes, on both stores: the Firebase-spelled
apps/firebase/tasks_main.py, ported, under `oncefire worker --processes 2` (the rate and the
concurrency read from the attempts the store recorded) and `oncefire run` (enqueued over HTTP,
and the task function served at its own path)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from oncefire import App
from oncefire.firebase import functions
from oncefire.operations.history import Attempt
from tests.e2e.cli_support import poll_until
from tests.e2e.firebase_workers import DEADLINE, firebase_workers
from tests.e2e.test_firebase_http import serve  # noqa: F401 - the fixture, by its name

pytestmark = pytest.mark.e2e


@pytest.fixture
def workers(store_url: str, tmp_path: Path) -> Iterator[App]:
    """`oncefire worker tasks_main.py --processes 2` on the store; an App on it to look."""
    with firebase_workers("tasks_main.py", store_url, tmp_path) as app:
        yield app


def attempts(app: App, function: str, count: int) -> list[Attempt]:
    """The function's `count` attempts, once they have all ended, oldest first."""
    poll_until(
        f"{count} attempts of {function}",
        lambda: len(app.history.executions(function, limit=500)) >= count,
        DEADLINE,
    )
    return sorted(app.history.executions(function, limit=500), key=lambda a: a.started_at)


def test_two_processes_keep_a_task_queues_rate_and_concurrency(workers: App) -> None:
    app = workers
    reports = functions.task_queue("buildreport", app=app)
    images = functions.task_queue("resizeimage", app=app)
    for n in range(24):
        reports.enqueue({"data": {"day": f"2026-01-{n + 1:02d}"}})
    for n in range(8):
        images.enqueue({"data": {"image": f"img{n}.png"}})

    built = attempts(app, "buildreport", 24)
    starts = [a.started_at for a in built]
    # RateLimits(max_dispatches_per_second=4): in any second, at most 4 starts plus the
    # bucket's burst of one, across both processes.
    busiest = max(sum(1 for t in starts if s <= t < s + 1) for s in starts)
    assert busiest <= 4 + 1, [round(t - starts[0], 2) for t in starts]
    assert starts[-1] - starts[0] >= (24 - 1 - 1) / 4  # no faster than the rate, overall

    resized = attempts(app, "resizeimage", 8)
    # RateLimits(max_concurrent_dispatches=2): never three at once, whichever process.
    edges = sorted(
        [(a.started_at, 1) for a in resized] + [(a.finished_at or 0, -1) for a in resized]
    )
    running = most = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        running += step
        most = max(most, running)
    assert most <= 2, [(a.started_at, a.finished_at) for a in resized]
    workers_seen = {a.worker.rsplit(":", 1)[0] for a in built + resized}
    assert len(workers_seen) == 2, "the tasks ran in one process only: nothing was tested"
    assert all(a.outcome == "succeeded" for a in built + resized)
    assert app.db.collection("reports").document("2026-01-24").get().get("retries") == 0


def test_oncefire_run_enqueues_over_http_and_serves_the_task_function_at_its_path(  # type: ignore[no-untyped-def]
    serve,  # noqa: F811 - the fixture imported above
    store_url: str,
) -> None:
    base = serve("tasks_main.py").base
    enqueued = httpx.get(f"{base}/backfillreports", params={"from": "2026-02-01", "days": 3})
    assert (enqueued.status_code, enqueued.text) == (200, "Enqueued 3 tasks")
    again = httpx.get(f"{base}/backfillreports", params={"from": "2026-02-01", "days": 3})
    assert again.status_code == 500  # the task ids are in use: AlreadyExistsError
    assert again.json()["type"] == "AlreadyExistsError"
    app = App(store_url)
    reports = app.db.collection("reports")
    poll_until("3 reports built by the workers", lambda: len(reports.get()) == 3, DEADLINE)
    assert reports.document("2026-02-03").get().to_dict() == {
        "day": "2026-02-03",
        "retries": 0,
        "queue": "buildreport",
    }
    # Firebase's way to test a task function: POST the task's body to it.
    called = httpx.post(f"{base}/buildreport", json={"data": {"day": "2026-03-01"}}, timeout=30)
    assert (called.status_code, called.json()) == (200, {"result": None})
    assert reports.document("2026-03-01").get().get("queue") == "called over HTTP"
    failed = httpx.post(
        f"{base}/buildreport", json={"data": {"day": "x", "failures": 1}}, timeout=30
    )
    assert (failed.status_code, failed.json()) == (
        500,
        {"error": {"status": "INTERNAL", "message": "INTERNAL"}},
    )
    bad = httpx.post(f"{base}/buildreport", json={"day": "x"}, timeout=30)
    assert (bad.status_code, bad.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert httpx.get(f"{base}/buildreport", timeout=30).status_code == 405
    outcomes = app.stats()["buildreport.http"].outcomes
    app.close()
    assert outcomes == {"succeeded": 1, "failed": 1, "permanent": 1}, outcomes
