"""Where the runtime reads the time: every retry, lease, TTL and age limit asks a Clock."""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=1024)
def to_datetime(seconds: float) -> datetime:
    """Seconds since the epoch as a timezone-aware UTC datetime (remembered: an event's time
    and its document's create and update times are often one time, asked three times)."""
    return datetime.fromtimestamp(seconds, tz=UTC)
