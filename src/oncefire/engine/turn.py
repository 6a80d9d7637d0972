"""Which queued deliveries a worker marks started in a store turn, and how they are charged
if the worker dies.

A turn's commit marks what the free slots take now and, a wave ahead, what they will take
next without a commit of their own (a commit an attempt would cost a disk flush each). A
delivery that starts alone right after the commit is marked *started*: if its worker dies it
may have run, and is charged a crashed attempt. The others are marked *ahead*: if the worker
dies, which of them ran, or which one ended the process, is not known, so each is handed back
uncharged and runs alone from then on (solo: leased by a worker holding nothing else, so its
next crash is its own and is charged). A lease marks what it takes ahead in its own
statement (its head started if it starts alone); the next commit confirms as started the
ahead ones whose function was entered since and still run (those that ended, it writes). One
whose thread has not called its function yet is not confirmed: a wave-mate that ends the
process meanwhile must not get it charged for a run it never had.

So a delivery that kills its process gets at most one uncharged run, then its attempts, each
charged, alone; its innocent wave-mates run once more, alone, uncharged.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from oncefire.engine.attempts import Flight
from oncefire.stores.base import Leased, Store, Taken
from oncefire.stores.sql_store import is_head_started

# A lease or a wave ahead takes about this many seconds of work beyond the free slots, at the
# attempts' mean duration: enough that a commit serves many events, little enough to share a
# backlog.
PREFETCH = 0.05


def ahead_count(concurrency: int, mean_duration: float | None) -> int:
    """How many deliveries beyond the free slots make about PREFETCH seconds of work."""
    if mean_duration is None:
        return 0
    return int(concurrency * PREFETCH / max(mean_duration, 1e-6))


def lease_limit(running: int, concurrency: int, mean_duration: float | None, most: int) -> int:
    """How many deliveries to lease: the free slots, plus about PREFETCH seconds of work at
    the attempts' recent mean duration, up to `most` (batch_size). Short functions come in
    large batches (few commits an event); slow ones one a slot (no process hoards a backlog)."""
    free = max(0, concurrency - running)
    return max(free, min(most, free + ahead_count(concurrency, mean_duration)))


# Short sync attempts waiting for a thread beyond the free slots, at most, per thread.
WAITING_PER_THREAD = 8


def waiting_count(concurrency: int, mean_duration: float | None, most: int) -> int:
    """How many short sync attempts may wait for a thread beyond the free slots: those marked
    ahead, up to WAITING_PER_THREAD a thread, and no more than a batch (`most`, batch_size)
    holds beyond the slots (none with batches of one: per-event acknowledgement)."""
    ahead = ahead_count(concurrency, mean_duration)
    return max(0, min(ahead, WAITING_PER_THREAD * concurrency, most - concurrency))


@dataclass(frozen=True, slots=True)
class Marking:
    """What one turn's commit marks: started (charged if lost) and ahead (solo if lost)."""

    started: list[Leased]
    ahead: list[Leased]

    def __bool__(self) -> bool:
        return bool(self.started or self.ahead)

    def ids(self) -> set[int]:
        """The ids of every delivery it marks."""
        return {c.lease.delivery_id for c in (*self.started, *self.ahead)}


def plan(queue: Sequence[Leased], free: int, ahead: int, marked: Collection[int]) -> Marking:
    """What to mark of a worker's queue (in start order) when `free` slots take its head now:
    the head, started if it starts alone, else ahead with the rest; then up to `ahead` more
    not marked yet. A head marked ahead earlier that now starts alone is marked started."""
    starting = list(queue[:free])
    beyond = [c for c in queue[free : free + ahead] if c.lease.delivery_id not in marked]
    if len(starting) == 1:
        return Marking(starting, beyond)
    return Marking([], [c for c in starting if c.lease.delivery_id not in marked] + beyond)


def marked_by_lease(leased: Sequence[Taken], free: int) -> tuple[set[int], set[int]]:
    """(the ids, those of them marked ahead) of what a lease with is_ahead marked: all of it
    ahead, but the first started when it starts alone (see Store.lease_due). So a new lease
    needs no plan: its head starts now, marked as plan() would have marked it."""
    ids = {c.lease.delivery_id for c in leased}
    if leased and is_head_started(free, len(leased)):
        return ids, ids - {leased[0].lease.delivery_id}
    return ids, ids


def mark(store: Store, marks: Marking, now: float) -> tuple[set[int], set[int]]:
    """Mark deliveries in the store, if their lease holds: (the ids marked, those of them
    marked ahead)."""
    started = store.start([c.lease for c in marks.started], now) if marks.started else set()
    ahead = (
        store.start([c.lease for c in marks.ahead], now, is_ahead=True) if marks.ahead else set()
    )
    return started | ahead, ahead


def confirm(
    store: Store, unconfirmed: Sequence[Flight], writing: Collection[int], now: float
) -> list[Flight]:
    """Mark started (no longer ahead) the attempts started while marked ahead whose function
    was entered, but not those being written (delivery ids in `writing`); which ones."""
    entered = [
        f for f in unconfirmed if f.entered.is_entered and f.leased.lease.delivery_id not in writing
    ]
    if entered:
        store.start([f.leased.lease for f in entered], now)
    return entered


def unconfirmed(
    before: Sequence[Flight], confirmed: Sequence[Flight], running: Iterable[Flight]
) -> list[Flight]:
    """What stays unconfirmed after a commit: neither confirmed by it nor ended."""
    if not before:
        return []  # the usual turn: no set of the running flights built
    done = {id(f) for f in confirmed}
    alive = {id(f) for f in running}
    return [f for f in before if id(f) not in done and id(f) in alive]
