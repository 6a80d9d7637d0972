"""The records the store protocol passes: functions, leases, attempts, counts and the
@idempotent record. Frozen and slotted; no behaviour beyond a few derived fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from oncefire.events import StoredEvent


@dataclass(frozen=True, slots=True)
class FunctionEntry:
    """A registered function as the store knows it, so any writer can fan out to it."""

    name: str
    kind: str  # "document", "message" or "schedule"
    source: str  # path pattern, topic or schedule name
    event_types: tuple[str, ...]
    registered_at: float
    ordering: str | None = None  # "document" or "key" (ordering_key): run one at a time
    fields: tuple[str, ...] = ()  # an update starts it only if one of these changed; () any
    attributes: tuple[tuple[str, str], ...] = ()  # a message starts it only if it carries these


@dataclass(frozen=True, slots=True)
class Catalog:
    """The functions and index fields of a store as of one catalogue version."""

    version: int
    functions: tuple[FunctionEntry, ...]
    index_fields: dict[str, tuple[str, ...]]  # collection -> fields, sorted
    building: frozenset[tuple[str, str]] = frozenset()  # (collection, field) still indexing

    def fields_of(self, collection: str) -> list[str]:
        """The declared index fields of a collection (a write keeps each one's entries)."""
        return list(self.index_fields.get(collection, ()))

    def complete_fields_of(self, collection: str) -> list[str]:
        """The index fields of a collection a query can use: declared and fully built."""
        return [f for f in self.fields_of(collection) if (collection, f) not in self.building]


class Fanout(NamedTuple):
    """What a document write makes besides the document, by the catalogue: the functions a
    creation and an update start, and the new data's index entries (None: no declared field)."""

    on_create: list[str]
    on_update: list[str]
    index_entries: dict[str, str] | None


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
    is_ahead: bool = False  # marked started a wave ahead: whether it ran is not known
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
    """A delivery a lease took (Store.take_due), its event read in the same statement or not
    yet (`event` None): Store.with_events makes it a Leased. SQLite reads the events after
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
class FunctionCounts:
    """Raw per-function figures over a window, from which the core computes stats."""

    outcomes: dict[str, int]
    histogram: dict[int, int]  # attempts per duration bin (oncefire.model.buckets)
    states: dict[str, int]
    max_attempts_per_event: int
    dedupe_hits: int


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The state of one @idempotent key: in progress under a lease, or completed."""

    key: str
    function: str
    status: str  # "in_progress" or "completed"
    token: str
    payload_hash: str
    lease_until: float
    expires_at: float
    result_json: str | None


@dataclass(frozen=True, slots=True)
class IdempotencyCompletion:
    """An @idempotent record to mark completed with its result, if its token still holds it."""

    key: str
    token: str
    completed_at: float
    expires_at: float
    result_json: str | None


@dataclass(frozen=True, slots=True)
class Completed:
    """What complete_many wrote: the deliveries whose lease still held, and the keys of the
    @idempotent records their endings completed (Ending.completions) whose token held."""

    ids: set[int]
    records: set[str]


@dataclass(frozen=True, slots=True)
class FunctionRow:
    """A stored function with what an operator needs to judge it."""

    name: str
    kind: str
    source: str
    event_types: tuple[str, ...]
    registered_at: float
    last_seen: float | None
    paused_at: float | None
    paused_reason: str | None
    pending: int
