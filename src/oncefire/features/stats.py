"""Per-function figures over a time window, computed from the hour buckets of attempts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from oncefire.model.buckets import percentile
from oncefire.stores.base import FunctionCounts


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
            p50_duration=percentile(counts.histogram, 0.50),
            p95_duration=percentile(counts.histogram, 0.95),
            attempts_per_event_max=counts.max_attempts_per_event,
            dedupe_hits=counts.dedupe_hits,
            outcomes=dict(counts.outcomes),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def stats_table(figures: Mapping[str, FunctionStats]) -> str:
    """A text table of FunctionStats by function name (what `oncefire stats` prints)."""
    lines = [
        f"{'function':<24}{'ok':>6}{'failed':>8}{'rate':>7}{'dead':>6}{'pending':>9}"
        f"{'p50 s':>8}{'p95 s':>8}{'max att':>9}{'dedupe':>8}"
    ]
    for name, s in figures.items():
        rate = "-" if s.success_rate is None else f"{s.success_rate:.0%}"
        p50 = "-" if s.p50_duration is None else f"{s.p50_duration:.3f}"
        p95 = "-" if s.p95_duration is None else f"{s.p95_duration:.3f}"
        lines.append(
            f"{name:<24}{s.succeeded:>6}{s.failed:>8}{rate:>7}{s.dead_letters:>6}"
            f"{s.pending:>9}{p50:>8}{p95:>8}{s.attempts_per_event_max:>9}{s.dedupe_hits:>8}"
        )
    return "\n".join(lines)
