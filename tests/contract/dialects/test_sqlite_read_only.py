"""A SQLite store opened while its files were read-only recovers once write access returns
(issue 11, point 25): the worker's connection is opened again, and the error names the cause.

The folder is made read-only with a read-only bind mount of itself (root ignores file
permissions); the mount is always undone, lazily, since the store's files are open on it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from oncefire import App
from oncefire.engine.worker import Worker
from oncefire.errors import StoreError
from oncefire.events import Event

WAIT = 20.0


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """The folder, read-only for everyone until the block ends."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    made = subprocess.run(
        ["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True, text=True
    )
    if made.returncode != 0:
        reason = f"cannot make a read-only bind mount here: {made.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def make(url: str, ran: list[str]) -> App:
    app = App(url)

    @app.on_message("t", name="f")
    def f(event: Event) -> None:
        ran.append(event.id)

    return app


@pytest.mark.slow
def test_a_worker_started_on_a_read_only_store_serves_once_write_access_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    url = f"sqlite:///{folder}/oncefire.db"
    ran: list[str] = []
    writer = make(url, ran)  # keeps the store open: its WAL and shared-memory files stay
    first = writer.publish("t", {"n": 1})
    worker_app = make(url, ran)
    worker = Worker(worker_app.runtime, concurrency=1)
    serving = threading.Thread(target=worker.run)
    try:
        with read_only(folder):
            with pytest.raises(StoreError, match=r"store at .* is read-only"):
                worker_app.drain()
            caplog.set_level(logging.ERROR, logger="oncefire.engine.worker")
            serving.start()  # a worker started while the files are read-only
            deadline = time.monotonic() + WAIT
            while "is read-only" not in caplog.text:
                assert time.monotonic() < deadline, "the worker never met the read-only store"
                time.sleep(0.01)
        second = writer.publish("t", {"n": 2})
        deadline = time.monotonic() + WAIT
        while sorted(ran) != sorted([first, second]):
            assert time.monotonic() < deadline, f"the worker does not serve again: ran {ran}"
            time.sleep(0.01)
    finally:
        worker.stop_requested.set()
        if serving.is_alive():
            serving.join(WAIT)
        worker_app.close()
        writer.close()
