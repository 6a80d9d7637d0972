"""What a store records of schedules: each one's last tick handled (fired or skipped),
written in the transaction that emits its ticks. The core (oncefire.features.ticks) decides which
ticks fire; a worker that starts reads here where the schedule stands."""

from __future__ import annotations

from typing import Protocol


class TickTx(Protocol):
    """The schedule operations of a store transaction (part of DocumentTx)."""

    def tick_after(self, function: str, since: float) -> float:
        """A schedule's last tick handled; when there is none yet, `since`, recorded as such."""

    def record_tick(self, function: str, tick: float) -> None:
        """Record a schedule's tick as handled (one before the recorded tick changes nothing)."""
