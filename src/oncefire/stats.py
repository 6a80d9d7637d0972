"""Per-function figures over a time window, computed from recorded attempts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from oncefire.stores.base import FunctionCounts


def percentile(values: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile of values (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-int(fraction * 1000) * len(ordered) // 1000))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class FunctionStats:
    """How one function fared over the window."""

    name: str
    succeeded: int
    failed: int
    success_rate: float | None
    dead_letters: int
    pending: int
    running: int
    p50_duration: float | None
    p95_duration: float | None
    attempts_per_event_max: int
    dedupe_hits: int
    outcomes: dict[str, int]

    @classmethod
    def from_counts(cls, name: str, counts: FunctionCounts) -> FunctionStats:
        """Compute the figures from the store's raw counts."""
        succeeded = counts.outcomes.get("succeeded", 0)
        failed = sum(counts.outcomes.values()) - succeeded
        total = succeeded + failed
        return cls(
            name=name,
            succeeded=succeeded,
            failed=failed,
            success_rate=succeeded / total if total else None,
            dead_letters=counts.states.get("dead", 0),
            pending=counts.states.get("pending", 0),
            running=counts.states.get("running", 0),
            p50_duration=percentile(counts.durations, 0.50),
            p95_duration=percentile(counts.durations, 0.95),
            attempts_per_event_max=counts.max_attempts_per_event,
            dedupe_hits=counts.dedupe_hits,
            outcomes=dict(counts.outcomes),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)
