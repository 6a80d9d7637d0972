"""The records the delivery queue passes: a lease, a delivery leased (or taken, its event
still unread), how an attempt ended, and what a batch of completions wrote."""

from __future__ import annotations

from dataclasses import dataclass

from oncefire.events import StoredEvent
from oncefire.stores.records.types import IdempotencyCompletion, IdempotencyRecord


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of ownership of a running delivery: its id and the token of this lease."""

    delivery_id: int
    token: str


@dataclass(frozen=True, slots=True)
class Leased:
    """A delivery a worker now holds, with its event and the number of this attempt."""

    lease: Lease
    function: str
    attempt: int
    started_at: float
    event: StoredEvent
    replayed_at: float | None = None  # when a person last replayed it from the dead letters
    is_started: bool = True  # False: leased but its function was never started
    is_ahead: bool = False  # marked ahead, with others: whether it ran is not known
    is_solo: bool = False  # leased alone: its worker holds nothing else while it runs
    # The @idempotent record acquired for it with its lease (engine/leased_records.py), if any.
    acquired: IdempotencyRecord | None = None

    @classmethod
    def run_out(
        cls,
        lease: Lease,
        head: tuple[str, int, float | None],
        event: StoredEvent,
        is_ahead: int,
        now: float,
    ) -> Leased:
        """A delivery whose lease ran out, from its (function, attempt, started_at): one
        never marked started was not started (as of now)."""
        function, attempt, started_at = head
        return cls(
            lease,
            function,
            attempt,
            now if started_at is None else started_at,
            event,
            is_started=started_at is not None,
            is_ahead=bool(is_ahead),
        )


@dataclass(frozen=True, slots=True)
class Taken:
    """A delivery a lease took (Queue.take_due), its event read in the same statement or not
    yet (`event` None): Queue.with_events makes it a Leased. SQLite reads the events after
    the lease's commit, so the write lock is not held while they are read."""

    lease: Lease
    function: str
    attempt: int
    started_at: float
    event_id: str
    replayed_at: float | None = None
    is_solo: bool = False
    event: StoredEvent | None = None

    def leased(self, event: StoredEvent) -> Leased:
        """The Leased this is, with its event."""
        leased = (self.lease, self.function, self.attempt, self.started_at, event)
        return Leased(*leased, self.replayed_at, is_solo=self.is_solo)


@dataclass(frozen=True, slots=True)
class Ending:
    """How an attempt ended: made when its function returns or raises (or cannot start), and
    completed by the worker (its end time, its error made storable) before the store writes
    it as the attempt's row."""

    outcome: str  # an Outcome
    error: str | None = None
    requested_delay: float | None = None  # the delay a Retry asked for
    started_at: float | None = None  # by the app's clock; None: when it was leased
    finished_at: float | None = None  # by the app's clock; None: when it is written
    cpu_seconds: float | None = None  # CPU time of the call's thread; None: not measured
    reads: int | None = None  # documents the function read (oncefire.features.usage); None: not run
    writes: int | None = None  # writes the function made; None: not run
    # The @idempotent records the attempt completed: written with it, in the same transaction.
    completions: tuple[IdempotencyCompletion, ...] = ()

    @property
    def end(self) -> float:
        """finished_at, which the worker sets before the store writes the ending."""
        if self.finished_at is None:
            raise ValueError("an ending is written with its end time")
        return self.finished_at


@dataclass(frozen=True, slots=True)
class Completed:
    """What complete_many wrote: the deliveries whose lease still held, and the keys of the
    @idempotent records their endings completed (Ending.completions) whose token held."""

    ids: set[int]
    records: set[str]
