"""Totals that only grow: what Prometheus's counters and the duration histogram read.

The store keeps one total per (function, kind, duration bin), added to by the statement that
writes an hour bucket, makes a dead letter, stops a loop or leases a delivery that waited for
its rate limit (schema 27). A kind is an attempt's outcome or one of the kinds below.
Retention purges the history they count, never the totals, so a counter never goes down.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from oncefire.model.buckets import DEDUPE, DURATION_BOUNDS

DEAD_LETTER = "dead_letter"  # a delivery became a dead letter, however it did
RATE_LIMITED = "rate_limited"  # a delivery started later than it was due, for want of a token
LOOP_STOPPED = "loop_stopped"  # a delivery was a dead letter at once: its event stopped a loop
NOT_ATTEMPTS = frozenset({DEDUPE, DEAD_LETTER, RATE_LIMITED, LOOP_STOPPED})

# A total as the store gives it: function, kind, bin, count, summed durations.
Row = tuple[str, str, int, int, float]


@dataclass(slots=True)
class FunctionTotals:
    """What one function has counted since its store began (or since its upgrade to schema
    27, which started the totals from the hour buckets it still held)."""

    attempts: dict[str, int] = field(default_factory=dict)  # by outcome
    by_bin: dict[int, int] = field(default_factory=dict)  # attempts by duration bin
    duration_sum: float = 0.0  # seconds, every attempt's
    dedupe_hits: int = 0
    dead_letters: int = 0
    rate_limited: int = 0
    loops_stopped: int = 0

    @property
    def rescues(self) -> int:
        """Attempts counted `crashed`: their worker (or HTTP server) died while they ran."""
        return self.attempts.get("crashed", 0)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound in seconds, attempts that took less), for every bin's upper bound,
        then (inf, every attempt): a histogram's cumulative buckets."""
        out: list[tuple[float, int]] = []
        seen = 0
        for bin_index, bound in enumerate(DURATION_BOUNDS):
            seen += self.by_bin.get(bin_index, 0)
            out.append((bound, seen))
        out.append((float("inf"), sum(self.by_bin.values())))
        return out


def fold(rows: Iterable[Row], functions: Iterable[str] = ()) -> dict[str, FunctionTotals]:
    """The store's totals by function; each of `functions` is there, at zero if it counted
    nothing yet."""
    out = {name: FunctionTotals() for name in functions}
    for function, kind, bin_index, count, duration_sum in rows:
        totals = out.setdefault(function, FunctionTotals())
        if kind == DEDUPE:
            totals.dedupe_hits += count
        elif kind == DEAD_LETTER:
            totals.dead_letters += count
        elif kind == RATE_LIMITED:
            totals.rate_limited += count
        elif kind == LOOP_STOPPED:
            totals.loops_stopped += count
        else:
            totals.attempts[kind] = totals.attempts.get(kind, 0) + count
            totals.by_bin[bin_index] = totals.by_bin.get(bin_index, 0) + count
            totals.duration_sum += duration_sum
    return out
