"""Where the runtime reads the time: every retry, lease, TTL and age limit asks a Clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """A source of the current time in seconds since the epoch (UTC)."""

    def now(self) -> float: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        return time.time()


def to_datetime(seconds: float) -> datetime:
    """Seconds since the epoch as a timezone-aware UTC datetime."""
    return datetime.fromtimestamp(seconds, tz=UTC)
