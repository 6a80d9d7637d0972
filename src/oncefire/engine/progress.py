"""Progress lines of long work: a worker's attempts done, their rate and the backlog left."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from oncefire.operations.history import History

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime

log = logging.getLogger(__name__)
INTERVAL = 5.0  # seconds between two progress lines of one worker


class Progress:
    """Logs at INFO, at most once per INTERVAL, how many attempts a worker ran, how fast,
    and how many deliveries of its functions are still pending. Silent while idle: the
    backlog is read only when attempts ended since the last line."""

    def __init__(
        self,
        rt: Runtime,
        name: str,
        functions: Sequence[str],
        *,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._history = History(rt)
        self._name = name
        self._functions = frozenset(functions)
        self._interval = interval
        self._clock = clock
        self._last_at = clock()
        self._last_done = 0

    def tick(self, done: int) -> None:
        """Log a progress line if INTERVAL passed and attempts ended since the last one
        (done: the worker's attempts so far)."""
        now = self._clock()
        elapsed = now - self._last_at
        if elapsed < self._interval:
            return
        ran = done - self._last_done
        self._last_at, self._last_done = now, done
        if ran <= 0:
            return
        backlog = self._history.backlog()  # one index-only count per function
        left = sum(b.pending for name, b in backlog.items() if name in self._functions)
        log.info(
            "%s: %d attempts done (%.1f/s), %d pending left", self._name, done, ran / elapsed, left
        )
