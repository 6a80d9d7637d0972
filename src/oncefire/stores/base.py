"""The Store protocol: the atomic operations the core asks of a database, and their records.

The core decides (retry rules, expiry, idempotency); a store records. Every time a
store writes comes from the caller (the app's clock), and every delivery transition
is guarded by the delivery's state and lease token, so a stale worker changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from oncefire.events import StoredEvent


class State(StrEnum):
    """Where a delivery is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    FORWARDED = "forwarded"


# The legal transitions; every store enforces them with guarded UPDATEs.
TRANSITIONS: dict[str, frozenset[State]] = {
    "claim": frozenset({State.PENDING}),  # -> running (or an expired running lease)
    "complete": frozenset({State.RUNNING}),  # -> succeeded
    "retry": frozenset({State.RUNNING}),  # -> pending(run_at)
    "bury": frozenset({State.RUNNING}),  # -> dead
    "forward": frozenset({State.RUNNING}),  # -> forwarded (republished on a dead-letter topic)
    "release": frozenset({State.RUNNING}),  # -> pending, the attempt uncounted
    "replay": frozenset({State.DEAD}),  # -> pending, attempt 0
    "dismiss": frozenset({State.DEAD}),  # -> deleted
}


@dataclass(frozen=True, slots=True)
class FunctionRecord:
    """A registered function as the store knows it, so any writer can fan out to it."""

    name: str
    kind: str  # "document", "message" or "schedule"
    source: str  # path pattern, topic or schedule name
    event_types: tuple[str, ...]
    registered_at: float


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of ownership of a running delivery: its id and the token of this claim."""

    delivery_id: int
    token: str


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery a worker now holds, with its event and the number of this attempt."""

    lease: Lease
    function: str
    attempt: int
    started_at: float
    event: StoredEvent
    replayed_at: float | None = None  # when a person last replayed it from the dead letters


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """How one attempt ended, as recorded in the attempts table."""

    outcome: str
    finished_at: float
    error: str | None = None
    started_at: float | None = None  # when the function started; None keeps the claim time


@dataclass(frozen=True, slots=True)
class DeadLetterRow:
    """A dead delivery with its event, as stored."""

    id: int
    function: str
    event_id: str
    event_type: str
    source: str
    attempts: int
    error: str | None
    failed_at: float
    payload: dict[str, Any]
    truncated: bool


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    """Which dead letters an operation applies to; None means any."""

    function: str | None = None
    error_contains: str | None = None
    since: float | None = None
    until: float | None = None


@dataclass(frozen=True, slots=True)
class FunctionCounts:
    """Raw per-function figures over a window, from which the core computes stats."""

    outcomes: dict[str, int]
    durations: list[float]
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


class DocumentTx(Protocol):
    """The document and outbox operations available inside one store transaction."""

    def get_document(self, path: str) -> dict[str, Any] | None:
        """{'data', 'create_time', 'update_time'} of a document, or None."""

    def put_document(
        self, path: str, collection: str, data_json: str, create_time: float, update_time: float
    ) -> None: ...

    def delete_document(self, path: str) -> None: ...

    def list_documents(
        self, collection: str, equals: tuple[str, str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(path, record) of a collection; `equals` (field, value key) uses a declared index."""

    def index_fields(self, collection: str) -> list[str]: ...

    def set_index_entries(self, path: str, collection: str, entries: dict[str, str]) -> None:
        """Replace the index entries (field -> value key) of a document."""

    def functions(self) -> list[FunctionRecord]: ...

    def append(
        self,
        event: StoredEvent,
        functions: Sequence[str],
        run_at: float,
        *,
        is_new: bool = False,
        data_json: str | None = None,
    ) -> bool:
        """Insert an event (once: False if its id exists) and one pending delivery per function.
        is_new: the id was just made, so the answer is known (True) without waiting for it;
        data_json: the event's data already encoded (codec.dumps)."""

    def add_deliveries(self, event_id: str, functions: Sequence[str], run_at: float) -> list[int]:
        """New pending deliveries of an existing event (a redelivery); their ids."""

    def claim_key(self, key: str, now: float, expires_at: float) -> bool:
        """Record an idempotency key; False if a live record of it exists."""

    def record_dedupe(self, function: str, now: float) -> None:
        """Count one duplicate skipped by an idempotency helper."""


class Store(Protocol):
    """A database that records oncefire's state; SQLite and PostgreSQL implement it."""

    url: str

    def migrate(self) -> int:
        """Create or upgrade the schema; return its version."""

    def close(self) -> None: ...

    def transaction(self) -> AbstractContextManager[DocumentTx]:
        """A serializable write transaction: commits on exit, rolls back on an exception."""

    def batch(self) -> AbstractContextManager[None]:
        """Store calls this thread makes inside the block share one transaction: one commit
        records many attempts. An error in any of them rolls back all."""

    def read(self) -> AbstractContextManager[DocumentTx]:
        """A read-only snapshot for document reads and queries."""

    def register_functions(self, records: Sequence[FunctionRecord]) -> None: ...

    def declare_index(
        self,
        collection: str,
        field: str,
        entries: Callable[[Iterator[tuple[str, dict[str, Any]]]], dict[str, str]],
    ) -> None:
        """Declare an indexed field and index the documents already there, in one transaction
        that no document write can interleave with; entries(documents) maps each path to
        its value key."""

    def claim(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
    ) -> list[Claimed]:
        """Take due pending deliveries, count their attempt, and lease them to worker."""

    def complete(self, lease: Lease, result: AttemptResult) -> bool: ...

    def complete_many(self, items: Sequence[tuple[Lease, AttemptResult]]) -> set[int]:
        """complete() for many deliveries at once; the ids of those whose lease still held."""

    def retry(self, lease: Lease, result: AttemptResult, run_at: float) -> bool: ...

    def bury(
        self, lease: Lease, result: AttemptResult, error: str | None, truncated: str | None
    ) -> bool:
        """Make a delivery dead; truncated, if given, replaces its stored payload."""

    def forward(
        self, lease: Lease, result: AttemptResult, event: StoredEvent, functions: Sequence[str]
    ) -> bool:
        """Finish a delivery by publishing its event on a dead-letter topic, atomically."""

    def release(self, leases: Sequence[Lease]) -> int:
        """Hand running deliveries back to pending without counting their attempt."""

    def renew(self, leases: Sequence[Lease], now: float, lease_until: float) -> list[Lease]:
        """Extend leases still held and not yet run out; return those (the rest are lost)."""

    def expired_leases(self, now: float, functions: Sequence[str], limit: int) -> list[Claimed]:
        """Running deliveries whose lease ran out before now (their worker died)."""

    def list_dead(
        self, where: DeadLetterFilter, limit: int, before_id: int | None
    ) -> list[DeadLetterRow]: ...

    def get_dead(self, delivery_id: int) -> DeadLetterRow | None: ...

    def count_dead(self, where: DeadLetterFilter) -> int: ...

    def replay(self, where: DeadLetterFilter, now: float, ids: Sequence[int] | None) -> int:
        """Move dead deliveries back to pending at attempt 0 with their original payload."""

    def dismiss(self, where: DeadLetterFilter, ids: Sequence[int] | None) -> int: ...

    def counts(self, since: float) -> dict[str, FunctionCounts]: ...

    def delivery_states(self, event_id: str) -> list[tuple[str, str, int]]:
        """(function, state, attempt) of each delivery of an event."""

    def attempts(self, event_id: str) -> list[dict[str, Any]]:
        """The attempts of an event's deliveries, oldest first."""

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout, returning early when another writer may have added work."""

    def next_due(self, functions: Sequence[str]) -> float | None:
        """The earliest run_at of a pending delivery, or None."""

    def record_dedupe(self, function: str, now: float) -> None: ...

    def purge_expired_claims(self, now: float, limit: int) -> int:
        """Delete claim and idempotency records whose expiry has passed; return how many."""

    # @idempotent records: each operation is one statement, committed on its own.

    def claim_idempotency(self, record: IdempotencyRecord, now: float) -> bool:
        """Insert an in-progress record, replacing one that expired (expires_at <= now);
        False, changing nothing, while a live record of the key exists."""

    def idempotency_record(self, key: str) -> IdempotencyRecord | None:
        """The record of an @idempotent key, as last committed."""

    def take_over_idempotency(
        self, record: IdempotencyRecord, stale_token: str, now: float
    ) -> bool:
        """Replace the in-progress record of stale_token whose lease ran out (lease_until <=
        now) with record; False if that record is gone, completed or held again."""

    def complete_idempotency(
        self, key: str, token: str, now: float, expires_at: float, result_json: str | None
    ) -> bool:
        """Mark the record completed with its result, if token still holds it."""

    def release_idempotency(self, key: str, token: str) -> bool:
        """Delete the record if token still holds it and it is in progress."""
