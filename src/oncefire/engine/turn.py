"""One turn of a worker's loop: what it does in its one store transaction, and the state kept
between turns (TurnState: the queue of leased deliveries and how each is marked).

A turn's commit marks *started* what the free slots take now, and marks *ahead* about PREFETCH
seconds of work more, so short attempts share one commit. Started: counted as a crashed
attempt if the worker dies. Ahead: if the worker dies, which of them ran is not known, so each is
released uncounted and *solo* (leased only by a worker holding nothing else). An attempt
started while marked ahead is confirmed started by the next commit once its function is entered.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice

from oncefire.engine.attempts import RunningAttempt, RunningAttempts
from oncefire.stores.base import Lease, Leased, Store, Taken
from oncefire.stores.sql_store import is_head_started

# A lease or a prefetch ahead takes about this many seconds of work beyond the free slots, at
# the attempts' mean duration: enough that a commit serves many events, little enough to share
# a backlog.
PREFETCH = 0.05
# Short sync attempts waiting for a thread beyond the free slots, at most, per thread.
WAITING_PER_THREAD = 8
# An ended attempt is written within this many seconds, whatever else runs.
WRITE_WITHIN = 0.05


def ahead_count(concurrency: int, mean_duration: float | None) -> int:
    """How many deliveries beyond the free slots make about PREFETCH seconds of work."""
    if mean_duration is None:
        return 0
    return int(concurrency * PREFETCH / max(mean_duration, 1e-6))


def lease_limit(running: int, concurrency: int, mean_duration: float | None, most: int) -> int:
    """How many deliveries to lease: the free slots, plus about PREFETCH seconds of work at
    the attempts' recent mean duration, up to `most` (batch_size). Short functions come in
    large batches (few commits per event); slow ones one per slot (no process hoards a
    backlog)."""
    free = max(0, concurrency - running)
    return max(free, min(most, free + ahead_count(concurrency, mean_duration)))


def waiting_count(concurrency: int, mean_duration: float | None, most: int) -> int:
    """How many short sync attempts may wait for a thread beyond the free slots: those marked
    ahead, up to WAITING_PER_THREAD per thread, and no more than a batch (`most`, batch_size)
    holds beyond the slots (none with batches of one: per-event acknowledgement)."""
    ahead = ahead_count(concurrency, mean_duration)
    return max(0, min(ahead, WAITING_PER_THREAD * concurrency, most - concurrency))


@dataclass(frozen=True, slots=True)
class Plan:
    """What one turn does in its store transaction (nothing at all when all three are False)."""

    free: int  # slots free at the start of the turn
    is_writing: bool  # write the attempts that ended
    is_leasing: bool  # lease a batch: the queue is empty and something may run
    is_marking: bool  # mark started the queued deliveries the free slots take next

    def __bool__(self) -> bool:
        return self.is_writing or self.is_leasing or self.is_marking


def plan(
    *,
    free: int,
    running: int,
    concurrency: int,
    waiting: int,
    state: TurnState,
    may_lease: bool,
    ended: int,
    ended_for: float,
    batch_size: int,
) -> Plan:
    """Decide a turn. It leases once the queue is empty, when a slot is free (or attempts moved
    since the last lease and fewer than `waiting` wait for a thread); it marks when one of the
    next `free` queued deliveries is not marked yet; and it writes what ended (`ended` attempts,
    the oldest `ended_for` seconds ago) when it commits anyway, when a batch is full, or when
    the oldest has waited WRITE_WITHIN."""
    is_leasing = (
        may_lease
        and not state.queue
        and not state.is_solo_held
        and (free > 0 or (state.has_moved and running < concurrency + waiting))
    )
    is_marking = state.is_marking(free)
    is_writing = ended > 0 and (
        is_marking or is_leasing or ended >= batch_size or ended_for >= WRITE_WITHIN
    )
    return Plan(free, is_writing, is_leasing, is_marking)


@dataclass(frozen=True, slots=True)
class Marks:
    """What one turn's commit marks: started (counted if lost) and ahead (solo if lost)."""

    started: list[Leased]
    ahead: list[Leased]

    def __bool__(self) -> bool:
        return bool(self.started or self.ahead)

    def ids(self) -> set[int]:
        """The ids of every delivery it marks."""
        return {c.lease.delivery_id for c in (*self.started, *self.ahead)}


def marks_for(queue: Sequence[Leased], free: int, ahead: int, marked: Collection[int]) -> Marks:
    """What to mark of a worker's queue (in start order) when `free` slots take its head now:
    the head, started if it starts alone, else ahead with the rest; then up to `ahead` more
    not marked yet. A head marked ahead earlier that now starts alone is marked started."""
    starting = list(queue[:free])
    beyond = [c for c in queue[free : free + ahead] if c.lease.delivery_id not in marked]
    if len(starting) == 1:
        return Marks(starting, beyond)
    return Marks([], [c for c in starting if c.lease.delivery_id not in marked] + beyond)


def marked_by_lease(leased: Sequence[Taken], free: int) -> tuple[set[int], set[int]]:
    """(the ids, those of them marked ahead) of what a lease with is_ahead marked: all of it
    ahead, but the first started when it starts alone (see Store.lease_due). So a new lease
    needs no marks: its head starts now, marked as marks_for() would have marked it."""
    ids = {c.lease.delivery_id for c in leased}
    if leased and is_head_started(free, len(leased)):
        return ids, ids - {leased[0].lease.delivery_id}
    return ids, ids


def mark(store: Store, marks: Marks, now: float) -> tuple[set[int], set[int]]:
    """Mark deliveries in the store, if their lease holds: (the ids marked, those of them
    marked ahead)."""
    started = store.start([c.lease for c in marks.started], now) if marks.started else set()
    ahead = (
        store.start([c.lease for c in marks.ahead], now, is_ahead=True) if marks.ahead else set()
    )
    return started | ahead, ahead


@dataclass(slots=True)
class TurnState:
    """What a worker keeps between turns: the deliveries it leased and has not started, in
    start order, with how the store has each marked; the attempts started while marked ahead
    and not confirmed yet; and two facts the next lease depends on."""

    queue: deque[Leased] = field(default_factory=deque)
    marks: dict[int, bool] = field(default_factory=dict)  # queued id -> is marked ahead
    unconfirmed: list[RunningAttempt] = field(default_factory=list)
    queued_at: float = field(default_factory=time.monotonic)  # when a lease last filled it
    is_solo_held: bool = False  # a solo delivery is held: nothing else is leased
    has_moved: bool = False  # an attempt ended since the last lease

    def is_marking(self, free: int) -> bool:
        """Whether one of the next `free` queued deliveries is not marked yet."""
        return any(c.lease.delivery_id not in self.marks for c in islice(self.queue, free))

    def marks_for(self, free: int, ahead: int) -> Marks:
        """What a turn marks of the queue (marks_for)."""
        return marks_for(list(self.queue), free, ahead, self.marks)

    def add(self, leased: Sequence[Leased], ahead: Collection[int]) -> None:
        """Queue a new lease, marked by its own statement (`ahead`: the ids marked ahead)."""
        self.queued_at = time.monotonic()
        self.queue.extend(leased)
        for item in leased:
            self.marks[item.lease.delivery_id] = item.lease.delivery_id in ahead
        self.is_solo_held = leased[0].is_solo  # a solo delivery is leased alone

    def record_marks(self, marked: Iterable[int], ahead: Collection[int]) -> None:
        """Note what a turn's commit marked (`ahead`: those of them marked ahead)."""
        for delivery_id in marked:
            self.marks[delivery_id] = delivery_id in ahead

    def start_marked(self, attempts: RunningAttempts, waiting: int) -> None:
        """Start the head of the queue while it is marked and has room (has_room, `waiting`):
        one not marked yet waits for the next turn. One marked ahead starts unconfirmed."""
        queue, marks = self.queue, self.marks
        while queue and attempts.has_room(queue[0], waiting):
            delivery_id = queue[0].lease.delivery_id
            is_ahead = marks.get(delivery_id)
            if is_ahead is None:
                break  # marked in the next turn
            del marks[delivery_id]
            attempt = attempts.start(queue.popleft())
            if is_ahead:
                self.unconfirmed.append(attempt)  # confirmed by a commit once entered

    def drop(self, delivery_ids: Collection[int]) -> None:
        """Drop queued deliveries whose lease was lost: another worker has them now."""
        self.queue = deque(c for c in self.queue if c.lease.delivery_id not in delivery_ids)
        for delivery_id in delivery_ids:
            self.marks.pop(delivery_id, None)

    def take_all(self) -> list[Leased]:
        """Empty the queue, to release what it held."""
        queued = list(self.queue)
        self.queue.clear()
        self.marks.clear()
        return queued

    def leases(self) -> list[Lease]:
        """The leases of the queued deliveries."""
        return [c.lease for c in self.queue]

    def confirm(self, store: Store, writing: Collection[int], now: float) -> list[RunningAttempt]:
        """Mark started (no longer ahead) the unconfirmed attempts whose function was entered,
        but not those being written (delivery ids in `writing`); which ones."""
        entered = [
            a
            for a in self.unconfirmed
            if a.entered.is_entered and a.leased.lease.delivery_id not in writing
        ]
        if entered:
            store.start([a.leased.lease for a in entered], now)
        return entered

    def settle_unconfirmed(
        self, confirmed: Sequence[RunningAttempt], running: Iterable[RunningAttempt]
    ) -> None:
        """After a commit: keep unconfirmed what it did not confirm and still runs."""
        if not self.unconfirmed:
            return  # the usual turn: no set of the running attempts built
        done = {id(a) for a in confirmed}
        alive = {id(a) for a in running}
        self.unconfirmed = [a for a in self.unconfirmed if id(a) not in done and id(a) in alive]
