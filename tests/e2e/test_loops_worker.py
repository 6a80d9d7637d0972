"""Loop protection and field filters in a real `oncefire worker` (two processes), on both
stores: the self-writing function runs 16 times and its 17th event is a dead letter; a
filtered function runs only for the field it watches. Waits poll the store with a deadline."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oncefire import App
from tests.e2e.cli_support import ONCEFIRE, poll_until

pytestmark = pytest.mark.e2e

APP_SOURCE = """
from oncefire import App, Increment

app = App()  # the store from ONCEFIRE_STORE


@app.on_document_updated("counters/{c}")
def bump(event):
    app.db.document(event.source).update({"n": Increment(1)})  # triggers itself


@app.on_document_updated("orders/{o}", fields=["status"])
def status_changed(event):
    status = event.data.after.get("status")
    app.db.document(f"status_log/{event.params['o']}-{status}").set({"status": status})
"""
DEADLINE = 60.0


def wait_for(what: str, check: Callable[[], object]) -> None:
    """Poll check() until it is truthy; fail after DEADLINE."""
    poll_until(what, check, DEADLINE)


@pytest.fixture
def worker(tmp_path: Path, store_url: str) -> Iterator[App]:
    """`oncefire worker app.py --processes 2` on the store; an App to write and read with."""
    (tmp_path / "app.py").write_text(APP_SOURCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env["ONCEFIRE_STORE"] = store_url
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [ONCEFIRE, "worker", "app.py", "--processes", "2"],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    app = App(store_url)
    try:
        wait_for("2 workers serving", lambda: log_path.read_text().count(" serving ") >= 2)
        yield app
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        app.close()


@pytest.mark.slow
def test_a_self_writing_function_is_stopped_at_depth_16_in_a_worker(worker: App) -> None:
    ref = worker.db.document("counters/c")
    ref.set({"n": 0})
    ref.update({"n": 1})  # the root of the chain
    wait_for("the loop's dead letter", lambda: worker.dead_letters.count() == 1)
    # The 16th run's success is recorded with its worker's next batch, which may come after
    # the dead letter its write caused: wait for that record too.
    wait_for("the 16th success", lambda: worker.stats()["bump"].succeeded >= 16)

    (letter,) = worker.dead_letters.list()
    assert letter.function == "bump"
    assert letter.error is not None
    assert letter.error.startswith("recursive loop stopped at depth 16 (root event ")
    assert ref.get().to_dict() == {"n": 17}  # 1, then 16 runs of bump
    stats = worker.stats()["bump"]
    assert (stats.succeeded, stats.pending, stats.dead_letters) == (16, 0, 1)


@pytest.mark.slow
def test_a_field_filter_holds_in_a_worker(worker: App) -> None:
    ref = worker.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5})
    ref.update({"amount": 6})  # not watched: no delivery
    ref.update({"status": "paid"})
    ref.set({"status": "paid", "amount": 7})  # not watched
    ref.update({"status": "shipped"})

    def settled() -> bool:  # with the filter broken, this holds only once 4 ran
        stats = worker.stats()["status_changed"]
        return stats.succeeded >= 2 and stats.pending == stats.running == 0

    wait_for("the status changes to run", settled)
    logged = worker.db.collection("status_log").get()
    assert sorted(s.id for s in logged) == ["o1-paid", "o1-shipped"]
    stats = worker.stats()["status_changed"]
    assert (stats.succeeded, stats.pending, stats.failed) == (2, 0, 0)
