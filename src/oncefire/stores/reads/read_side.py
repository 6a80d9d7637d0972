"""The read side of the store as it stands: dead letters (replay, dismiss and their reads),
counts, attempts, bucket sums and budgets. The read model (stores/reads/) takes these over;
they are kept together here so that move is one step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from oncefire.stores.reads.counts import FunctionCounts
from oncefire.stores.reads.dead_rows import DeadLetterFilter, DeadLetterRow, DeadSearchRows


class ReadSide(Protocol):
    """Dead letters and the figures the dashboard, stats and budgets read."""

    def list_dead(
        self, where: DeadLetterFilter, limit: int, before_id: int | None
    ) -> list[DeadLetterRow]: ...

    def get_dead(self, delivery_id: int) -> DeadLetterRow | None: ...

    def count_dead(self, where: DeadLetterFilter) -> int: ...

    def count_dead_up_to(self, function: str, error_group: str, cap: int) -> int:
        """How many dead letters a function's error group holds, read through its index up
        to cap + 1 of them (cap + 1: more than cap)."""

    def search_dead(
        self, function: str, text: str, before_id: int | None, window: int, limit: int
    ) -> DeadSearchRows:
        """Search the window newest dead letters of a function (older than before_id) for
        errors containing text: the window's size and matches, and the newest matches."""

    def replay(self, where: DeadLetterFilter, now: float, ids: Sequence[int] | None) -> int:
        """Move dead deliveries back to pending at attempt 0 with their original payload."""

    def dismiss(self, where: DeadLetterFilter, ids: Sequence[int] | None) -> int: ...

    def counts(self, since: float) -> dict[str, FunctionCounts]: ...

    def delivery_states(self, event_id: str) -> list[tuple[str, str, int]]:
        """(function, state, attempt) of each delivery of an event."""

    def attempts(self, event_id: str) -> list[dict[str, Any]]:
        """The attempts of an event's deliveries, oldest first."""

    def bucket_sums(self, since: float) -> list[tuple[str, str, int, float, float]]:
        """(function, outcome, attempts, seconds, CPU seconds) since a time (whole hours)."""

    def budget_used(self, function: str, since: float) -> tuple[int, int]:
        """(attempts of a function ended since a time, its deliveries running now)."""

    def failures_after(self, function: str, after: float) -> tuple[int, int]:
        """(attempts of a function ended after a time, how many of them did not succeed)."""

    def count_unrouted(self) -> int:
        """How many events no function has taken yet."""
