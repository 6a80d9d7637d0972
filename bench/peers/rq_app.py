"""RQ on Redis: the no-op and latency jobs, and the queue they go to."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import report_start


def queue(connection: Any) -> Any:
    """The default queue on the benchmarks' Redis db."""
    from rq import Queue

    return Queue("default", connection=connection)


def noop() -> None:
    """Does nothing."""


def latency(key: str) -> None:
    """Reports its start to the latency probe."""
    report_start(key)
