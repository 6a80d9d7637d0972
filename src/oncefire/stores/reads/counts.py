"""Rows of the read model (statistics): kept apart from the write-side contracts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FunctionCounts:
    """Raw per-function figures over a window, from which the core computes stats."""

    outcomes: dict[str, int]
    histogram: dict[int, int]  # attempts per duration bin (oncefire.model.buckets)
    states: dict[str, int]
    max_attempts_per_event: int
    dedupe_hits: int
