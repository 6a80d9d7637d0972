"""Procrastinate on PostgreSQL (its own database): the no-op and latency tasks."""

from __future__ import annotations

import sys
from pathlib import Path

import procrastinate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import PROCRASTINATE_PG_DB, pg_url, report_start

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=pg_url(PROCRASTINATE_PG_DB))
)


@app.task(name="noop")  # type: ignore[untyped-decorator]  # procrastinate: a peer library, absent when type-checking
def noop() -> None:
    """Does nothing."""


@app.task(name="latency")  # type: ignore[untyped-decorator]  # procrastinate: a peer library, absent when type-checking
def latency(key: str) -> None:
    """Reports its start to the latency probe."""
    report_start(key)
