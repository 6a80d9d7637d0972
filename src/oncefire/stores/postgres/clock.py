"""Lease times on PostgreSQL by the database's clock: every worker of a cluster writes and
judges leases by one clock, so a machine whose clock is skewed cannot rescue live leases.

The app's clock stays the source of time for everything else. When it is the system clock,
the store measures the offset between the database's clock and it (at connect and every
REMEASURE_EVERY seconds) and adds it to the lease times it writes and compares. Any other
clock (a TestClock) is taken as it is: its time is the test's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from oncefire.clock import Clock, SystemClock

REMEASURE_EVERY = 300.0  # seconds between two measures of the offset
log = logging.getLogger(__name__)


class DatabaseClock:
    """The offset of the database's clock from the app's, applied to lease times."""

    def __init__(self, database_time: Callable[[], float]) -> None:
        self._database_time = database_time
        self._clock: Clock | None = None
        self._offset = 0.0
        self._measured_at = -float("inf")  # time.monotonic() of the last measure
        self._lock = threading.Lock()

    def follow(self, clock: Clock) -> None:
        """Judge leases by the database's clock when clock is the system clock."""
        self._clock = clock if isinstance(clock, SystemClock) else None
        self._measured_at = -float("inf")

    def offset(self) -> float:
        """Seconds to add to the app's time to get the database's (0 for other clocks)."""
        clock = self._clock
        if clock is None:
            return 0.0
        if time.monotonic() - self._measured_at >= REMEASURE_EVERY:
            with self._lock:
                if time.monotonic() - self._measured_at >= REMEASURE_EVERY:
                    self._measure(clock)
        return self._offset

    def _measure(self, clock: Clock) -> None:
        before = clock.now()
        database = self._database_time()
        after = clock.now()
        offset = database - (before + after) / 2
        if abs(offset - self._offset) >= 1.0:
            log.info("this clock is %.1f s off the database's; leases use the database's", -offset)
        self._offset = offset
        self._measured_at = time.monotonic()
