"""Celery on the Redis broker with late acknowledgement: the no-op and latency tasks."""

from __future__ import annotations

import sys
from pathlib import Path

from celery import Celery

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import REDIS_URL, report_start

app = Celery("bench", broker=REDIS_URL)
app.conf.update(
    task_acks_late=True,  # acknowledged after the task ran: a crash redelivers it
    task_ignore_result=True,  # no result backend: nothing is waiting for results
    broker_connection_retry_on_startup=True,
)


@app.task(name="noop")  # type: ignore[untyped-decorator]  # celery: a peer library, absent when type-checking
def noop() -> None:
    """Does nothing."""


@app.task(name="latency")  # type: ignore[untyped-decorator]  # celery: a peer library, absent when type-checking
def latency(key: str) -> None:
    """Reports its start to the latency probe."""
    report_start(key)
