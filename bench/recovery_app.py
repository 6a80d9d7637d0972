"""The app bench/recovery.py runs in real `oncefire worker` processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from oncefire import App, RetryPolicy
from oncefire.events import Event

app = App()


def mark(event: Event) -> None:
    """Leave `start-EVENT-ATTEMPT` in $BENCH_DIR holding the pid and the wall time."""
    path = Path(os.environ["BENCH_DIR"]) / f"start-{event.id}-{event.attempt}"
    path.write_text(f"{os.getpid()} {time.time()!r}")


@app.on_message("wake")
def wake(event: Event) -> None:
    """Returns at once: its start time measures the write-to-start latency."""
    mark(event)


# first_delay=0: a crashed attempt runs again as soon as it is rescued, so the figure is the
# recovery itself, not the retry policy's backoff.
@app.on_message("slow", retry_policy=RetryPolicy(first_delay=0), timeout=600)
def slow(event: Event) -> None:
    """Its first attempt runs until its process is killed."""
    mark(event)
    if event.attempt == 1:
        time.sleep(600)
