"""`oncefire worker` on a Firebase-spelled app of apps/firebase/, ported with `oncefire port`,
for the e2e tests of task queues, custom events and storage."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from oncefire import App
from tests.e2e.cli_support import ONCEFIRE, poll_until
from tests.e2e.test_firebase_http import ported

DEADLINE = 90.0


@contextmanager
def firebase_workers(
    name: str, store_url: str, folder: Path, processes: int = 2, **settings: str
) -> Iterator[App]:
    """`oncefire worker <ported name> --processes N` on the store, with ONCEFIRE_<settings>;
    an App with the same settings on the store to look with. No traceback may be logged."""
    main = ported(name, folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env.update(ONCEFIRE_STORE=store_url, ONCEFIRE_SHUTDOWN_GRACE="5")
    env.update({f"ONCEFIRE_{key.upper()}": value for key, value in settings.items()})
    log_path = folder / "worker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [ONCEFIRE, "worker", str(main), "--processes", str(processes), "--concurrency", "8"],
            env=env,
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    app = App(store_url, **settings)  # type: ignore[arg-type]
    try:
        count = processes

        def serving() -> bool:
            return log_path.read_text(errors="replace").count(" serving ") >= count

        poll_until(f"{processes} workers", serving, DEADLINE)
        yield app
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        app.close()
    logged = log_path.read_text(errors="replace")
    assert "Traceback" not in logged, logged[-3000:]
