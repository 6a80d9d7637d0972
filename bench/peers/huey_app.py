"""Huey with its SQLite storage (a file under bench/.work): the no-op and latency tasks."""

from __future__ import annotations

import sys
from pathlib import Path

from huey import SqliteHuey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import WORK, report_start

FILE = WORK / "huey.db"
# WAL and SQLite's default synchronous=FULL (Huey sets neither fsync nor synchronous).
huey = SqliteHuey("bench", filename=str(FILE), results=False)


@huey.task(name="noop")  # type: ignore[untyped-decorator]  # huey: a peer library, absent when type-checking
def noop() -> None:
    """Does nothing."""


@huey.task(name="latency")  # type: ignore[untyped-decorator]  # huey: a peer library, absent when type-checking
def latency(key: str) -> None:
    """Reports its start to the latency probe."""
    report_start(key)
