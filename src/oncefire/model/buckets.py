"""Hour buckets of attempts: what statistics, the dashboard and cost read instead of attempt rows.

One bucket row per (function, hour, outcome, duration bin) holds a count, summed durations,
CPU seconds and store reads and writes, and the highest attempt number. The store adds to them
in the transaction that records the attempts, so a read over a window costs the same at any
history. Buckets are an hour wide: a window is counted in whole hours (the hour that holds its
start is included).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping

HOUR = 3600.0

# Lower bounds, in seconds, of duration bins 1..16 (bin 0 is below 1 ms). Part of the schema:
# migration 009 backfills with them and PostgreSQL's width_bucket gets them as a parameter.
DURATION_BOUNDS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip

DEDUPE = "dedupe"  # the outcome of a bucket row that counts duplicates skipped


def hour_of(at: float) -> float:
    """The start of the hour bucket that holds a time."""
    return math.floor(at / HOUR) * HOUR


def bin_of(duration: float) -> int:
    """The duration bin of a duration in seconds (what width_bucket gives on PostgreSQL)."""
    return bisect_right(DURATION_BOUNDS, duration)


def upper_bound(bin_index: int) -> float:
    """The largest duration a bin holds (its next bin's lower bound; the last is open)."""
    return DURATION_BOUNDS[min(bin_index, len(DURATION_BOUNDS) - 1)]


# An attempt's figures for its bucket: function, number, started_at, finished_at, outcome,
# cpu_seconds, reads, writes (None: not counted).
Figures = tuple[str, int, float, float, str, float | None, int | None, int | None]


def rows_for(attempts: Iterable[Figures]) -> list[dict[str, object]]:
    """A batch of attempts' figures summed per bucket: one upsert row per bucket touched."""
    sums: dict[tuple[str, float, str, int], list[float]] = {}
    for function, number, started_at, finished_at, outcome, cpu, reads, writes in attempts:
        duration = finished_at - started_at
        key = (function, hour_of(finished_at), outcome, bin_of(duration))
        entry = sums.setdefault(key, [0, 0.0, 0.0, 0, 0, 0])
        entry[0] += 1
        entry[1] += max(duration, 0.0)
        entry[2] += cpu or 0.0
        entry[3] = max(entry[3], number)
        entry[4] += reads or 0
        entry[5] += writes or 0
    return [
        {
            "function": function,
            "hour": hour,
            "outcome": outcome,
            "bin": bin_index,
            "count": int(count),
            "duration_sum": duration,
            "cpu_sum": cpu,
            "max_number": int(number),
            "reads_sum": int(reads),
            "writes_sum": int(writes),
        }
        for (function, hour, outcome, bin_index), (
            count,
            duration,
            cpu,
            number,
            reads,
            writes,
        ) in sums.items()
    ]


def percentile(histogram: Mapping[int, int], fraction: float) -> float | None:
    """The nearest-rank percentile of a duration histogram, as its bin's upper bound."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(fraction * total - 1e-9))
    seen = 0
    for bin_index in sorted(histogram):
        seen += histogram[bin_index]
        if seen >= rank:
            return upper_bound(bin_index)
    return upper_bound(max(histogram))  # pragma: no cover - the loop reaches the total
