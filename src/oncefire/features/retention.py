"""Retention: which history is purged, when, and in what steps.

The rules (settings in `Settings`, the table in docs/retention.md):

| what | kept |
|---|---|
| succeeded and forwarded deliveries, their attempts | `succeeded_retention` after they finished |
| events | while any delivery of theirs is not finished, then as long as their deliveries |
| dead letters (their attempts and events) | until replayed or dismissed: never purged |
| pending and running deliveries (their events) | never purged |
| `tx.claim` claims and `@idempotent` records | until their TTL (expiry) has passed |
| unrouted events | `unrouted_retention` after their time |
| hour buckets of statistics | `statistics_retention` |

Workers purge in their maintenance step (every `sweep_every`), in rounds of a batch of each
kind until none is left or STEP_SECONDS have passed, of `purge_batch` rows each (one short
write transaction a batch, which also gives up to 64 free SQLite pages back); `oncefire
purge` runs the same batches until nothing is left, then gives every free page back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oncefire.errors import ConfigError

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime
    from oncefire.settings import Settings
    from oncefire.triggers import Options

# Kinds of history, purged in this order, each with the tables its batches count.
KINDS = ("finished", "claims", "unrouted", "dedupe_hits", "buckets")
TABLES = ("deliveries", "attempts", "events", "claims", "unrouted", "dedupe_hits", "buckets")
STEP_BATCHES = 10_000  # rounds (a batch of each kind) in one step: the time bounds it first
# No new round past this: 5 % of a worker's time at the default sweep_every of 5 s.
STEP_SECONDS = 0.25
# A worker whose step ended with rows left steps again after this many times the step's
# duration, not at its next sweep: at most a quarter of its time, so that a store written
# faster than one step a sweep purges catches up.
CATCH_UP_EVERY = 4.0
RECLAIM_PAGES = 256  # free pages a step of `oncefire purge` gives back


@dataclass(slots=True)
class PurgeCounts:
    """Rows purged (or, for a dry run, that would be), by table."""

    deliveries: int = 0
    attempts: int = 0
    events: int = 0
    claims: int = 0  # tx.claim claims and @idempotent records
    unrouted: int = 0  # unrouted events
    dedupe_hits: int = 0
    buckets: int = 0
    is_dry_run: bool = False
    is_behind: bool = False  # the step ended (out of time or rounds) with rows left

    def add(self, counts: dict[str, int]) -> None:
        """Add a batch's counts."""
        for name, n in counts.items():
            setattr(self, name, getattr(self, name) + n)

    def total(self) -> int:
        """All rows, every table."""
        return sum(getattr(self, name) for name in TABLES)

    def to_dict(self) -> dict[str, int]:
        """Rows by table."""
        return {name: getattr(self, name) for name in TABLES}


def check_registration(settings: Settings, name: str, options: Options) -> None:
    """Refuse a retention shorter than a function's max_event_age plus its retry window: an
    event forgotten before its last redelivery could run again as new."""
    minimum = options.redelivery_window()
    if settings.succeeded_retention < minimum:
        raise ConfigError(
            f"succeeded_retention={settings.succeeded_retention:g} s is shorter than {name!r} "
            f"may still redeliver an event: use a succeeded_retention of at least {minimum:g} s "
            "(max_event_age plus the retry window)."
        )


def cutoffs(settings: Settings, now: float) -> dict[str, float]:
    """For each kind, the time before which its history may go."""
    return {
        "finished": now - settings.succeeded_retention,
        "claims": now,  # a tx.claim key or an @idempotent record carries its own expiry
        "unrouted": now - settings.unrouted_retention,
        "dedupe_hits": now - settings.succeeded_retention,
        "buckets": now - settings.statistics_retention,
    }


def purge_step(
    rt: Runtime, *, batches: int = STEP_BATCHES, seconds: float = STEP_SECONDS
) -> PurgeCounts:
    """Purge what retention allows in rounds, a batch of each kind with rows left, for at
    most `batches` rounds and no new round after `seconds` (the worker's loop waits
    meanwhile): every step purges some of every kind, so a large backlog of one kind starves
    no other. What was purged."""
    size = rt.settings.purge_batch
    counts = PurgeCounts()
    deadline = time.monotonic() + seconds
    left = cutoffs(rt.settings, rt.clock.now())
    for _ in range(batches):
        for kind, before in list(left.items()):
            batch = rt.store.purge(kind, before, size)
            counts.add(batch)
            if batch["deliveries" if kind == "finished" else kind] < size:
                del left[kind]  # none left of this kind
        if not left or time.monotonic() > deadline:
            break  # the next step goes on
    counts.is_behind = bool(left)
    return counts


def purge(rt: Runtime, *, dry_run: bool = False) -> PurgeCounts:
    """Purge everything retention allows now, then give the free pages back (or, for a dry
    run, count what would be purged, changing nothing)."""
    if dry_run:
        counts = PurgeCounts(is_dry_run=True)
        counts.add(rt.store.count_purgeable(cutoffs(rt.settings, rt.clock.now())))
        return counts
    total = PurgeCounts()
    while (step := purge_step(rt)).total():
        total.add(step.to_dict())
    while rt.store.purge("pages", 0.0, RECLAIM_PAGES)["pages"] == RECLAIM_PAGES:
        pass  # each step a short transaction, until the free pages are given back
    return total
