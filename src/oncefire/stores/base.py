"""The Store protocol: the atomic operations the core asks of a database, and their records.

The core decides (retry rules, expiry, idempotency); a store records. Every time a store
writes comes from the caller (the app's clock), and every delivery transition is guarded by
its state and lease token, so a stale worker changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from oncefire.clock import Clock
from oncefire.events import StoredEvent
from oncefire.model.rates import RateLimit
from oncefire.stores.catalogue.tables import TableTriggers
from oncefire.stores.catalogue.types import Catalog as Catalog
from oncefire.stores.catalogue.types import Fanout as Fanout
from oncefire.stores.catalogue.types import FunctionEntry as FunctionEntry
from oncefire.stores.catalogue.types import FunctionRow as FunctionRow
from oncefire.stores.dead_rows import DeadLetterFilter as DeadLetterFilter
from oncefire.stores.dead_rows import DeadLetterRow as DeadLetterRow
from oncefire.stores.dead_rows import DeadSearchRows as DeadSearchRows
from oncefire.stores.dead_rows import error_group_of as error_group_of
from oncefire.stores.documents.ticks import TickTx
from oncefire.stores.queue.lease_tx import LeaseTx
from oncefire.stores.queue.types import Completed as Completed
from oncefire.stores.queue.types import Ending as Ending
from oncefire.stores.queue.types import Lease as Lease
from oncefire.stores.queue.types import Leased as Leased
from oncefire.stores.queue.types import Taken as Taken
from oncefire.stores.read_rows import FunctionCounts as FunctionCounts
from oncefire.stores.records.types import IdempotencyCompletion as IdempotencyCompletion
from oncefire.stores.records.types import IdempotencyRecord as IdempotencyRecord


class DocumentTx(TickTx, LeaseTx, Protocol):
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

    def documents_page(
        self, collection: str, after: str, limit: int
    ) -> list[tuple[str, dict[str, Any]]]:
        """(path, record) of at most limit documents whose path sorts after `after`."""

    def index_page(
        self,
        collection: str,
        field: str,
        key_range: tuple[str, str],
        after: tuple[str, str],
        is_desc: bool,
        limit: int,
    ) -> list[tuple[str, dict[str, Any], str]]:
        """(path, record, key) of up to limit documents, key in key_range, past `after`."""

    def collection_names(self, prefix: str) -> list[str]:
        """The paths of the collections that start with prefix and hold a document."""

    def index_fields(self, collection: str) -> list[str]: ...

    def complete_index_fields(self, collection: str) -> list[str]:
        """The index fields a query can use: declared and fully built."""

    def set_index_entries(self, path: str, collection: str, entries: dict[str, str]) -> None:
        """Replace the index entries (field -> value key) of a document."""

    def functions(self) -> list[FunctionEntry]: ...

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

    def bury_event(self, event_id: str, error: str, now: float) -> None:
        """Make the pending deliveries of an event just appended dead letters, with error."""

    def mark_routed(self, event_id: str, from_state: str, to_state: str | None) -> bool:
        """Move an event's routing mark from from_state to to_state (None: routed); False if
        its mark is no longer from_state (another worker routed it)."""

    def claim_key(self, key: str, now: float, expires_at: float) -> bool:
        """Record an idempotency key; False if a live record of it exists."""

    def count_dedupe_hit(self, function: str, now: float) -> None:
        """Count one duplicate skipped by an idempotency helper."""


class Store(Protocol):
    """A database that records oncefire's state; SQLite and PostgreSQL implement it."""

    url: str
    dialect: str  # "sqlite" or "postgres": which named queries (stores/sql/<dialect>) it runs
    tables: TableTriggers
    """The triggers on the application's own tables (oncefire.tables decides what they hold)."""

    def migrate(self, *, beside_tables: bool = True) -> int:
        """Create or upgrade the schema; its version (beside_tables: see stores/schema.py)."""

    def close(self) -> None: ...

    def reopen_if_moved(self) -> bool:
        """Reopen the store if its file was deleted or replaced under it (SQLite); if so."""

    def transaction(self) -> AbstractContextManager[DocumentTx]:
        """A serializable write transaction: commits on exit, rolls back on an exception."""

    def batch(self) -> AbstractContextManager[None]:
        """This thread's store calls in the block share one transaction (one commit, or none)."""

    def read(self) -> AbstractContextManager[DocumentTx]:
        """A read-only snapshot for document reads and queries."""

    def set_document(
        self,
        path: str,
        data_json: str,
        now: float,
        event_id: str,
        fanout_of: Callable[[Catalog], Fanout | None],
    ) -> bool:
        """Write a whole document (data_json, made by the caller) and its event by the store's
        own write (one statement on PostgreSQL, a transaction of its statements on SQLite);
        fanout_of(catalogue) answers what a creation and an update start and the index entries.
        False, writing nothing, when a transaction must write it (or fanout_of answers None)."""

    def register_functions(self, records: Sequence[FunctionEntry]) -> None: ...

    def declare_index(
        self,
        collection: str,
        field: str,
        entries: Callable[[Iterator[tuple[str, dict[str, Any]]]], dict[str, str]],
    ) -> None:
        """Declare an indexed field and index the documents there, in one transaction no write
        interleaves; entries(documents) maps paths to value keys (a declared field is kept)."""

    def expired_paths(
        self, collection: str, field: str, ranges: Sequence[tuple[str, str]], limit: int
    ) -> list[str]:
        """Paths of at most limit documents of a collection whose key of an indexed field
        lies in one of two key ranges, each walked from its lowest key (one index probe)."""

    def lease_due(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
        rates: Mapping[str, RateLimit] | None = None,
        is_alone: bool = False,
        is_ahead: bool = False,
        free: int = 0,
    ) -> list[Leased]:
        """Take due pending deliveries, count their attempt, and lease them to worker. A
        function in `rates` takes at most the whole tokens of its bucket, and spends one a
        delivery leased. A solo delivery is leased only alone: a lease takes the due ones
        before the first solo one, or that one alone if it comes first and the worker holds
        nothing else (is_alone). is_ahead: the same statement marks them started a wave ahead
        (as start(..., is_ahead=True) would, see marking.py), but the first started (as
        start() would) when it starts alone: `free` is 1, or it is the only one leased.
        The same as with_events(take_due(...))."""

    def take_due(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
        rates: Mapping[str, RateLimit] | None = None,
        is_alone: bool = False,
        is_ahead: bool = False,
        free: int = 0,
    ) -> list[Taken]:
        """lease_due's lease, with the events read in its statement where the database does
        that in one round trip (PostgreSQL), or left for with_events to read once the lease's
        transaction (a worker's turn: a batch) has committed (SQLite: not under the lock)."""

    def with_events(self, taken: Sequence[Taken]) -> list[Leased]:
        """What take_due took, with every event read (those it left unread in one query)."""

    def rate_tokens(self, rates: Mapping[str, RateLimit], now: float) -> dict[str, float]:
        """The tokens each rate-limited function's bucket holds at `now` (read only)."""

    def later_of_key(self, delivery_id: int, limit: int) -> tuple[str | None, list[str]]:
        """A delivery's ordering key (None: none) and up to `limit` event ids waiting behind it."""

    def unkeyed_deliveries(
        self, functions: Sequence[str], limit: int
    ) -> list[tuple[int, str, int, StoredEvent]]:
        """(delivery id, function, attempt, event) of pending deliveries with no key yet."""

    def key_deliveries(
        self, keys: Sequence[tuple[int, str]], errors: Sequence[tuple[int, str]], now: float
    ) -> None:
        """Set computed ordering keys; make those that have an error instead dead letters."""

    def complete(self, lease: Lease, result: Ending) -> bool: ...

    def complete_many(self, items: Sequence[tuple[Lease, Ending]]) -> Completed:
        """complete() for many deliveries at once, with the @idempotent records their endings
        completed (in one statement on PostgreSQL); what was written."""

    def retry(self, lease: Lease, result: Ending, run_at: float) -> bool: ...

    def bury(self, lease: Lease, result: Ending, error: str | None, truncated: str | None) -> bool:
        """Make a delivery dead; truncated, if given, replaces its stored payload."""

    def forward(
        self, lease: Lease, result: Ending, event: StoredEvent, functions: Sequence[str]
    ) -> bool:
        """Finish a delivery by publishing its event on a dead-letter topic, atomically."""

    def start(self, leases: Sequence[Lease], now: float, *, is_ahead: bool = False) -> set[int]:
        """Mark leased deliveries started (started_at now) if their lease holds; the ids marked.
        Only a started one whose lease ran out is charged; one marked is_ahead (a wave ahead,
        with others) is handed back uncharged and solo (rescue.py); marked again, started."""

    def release(
        self, leases: Sequence[Lease], *, is_solo: bool = False, run_at: float | None = None
    ) -> int:
        """Hand running deliveries back to pending, their attempt uncounted; is_solo: each is
        leased alone from now on (see lease_due); run_at: due then (None: when they were)."""

    def renew(self, leases: Sequence[Lease], now: float, lease_until: float) -> list[Lease]:
        """Extend leases still held and not yet run out; return those (the rest are lost)."""

    def expired_leases(self, now: float, functions: Sequence[str], limit: int) -> list[Leased]:
        """Running deliveries whose lease ran out before now (their worker died)."""

    def use_clock(self, clock: Clock) -> None:
        """The app's clock (PostgreSQL judges leases by the database's when it is the system's)."""

    def take_expired_leases(
        self, now: float, lease_until: float, functions: Sequence[str], limit: int
    ) -> list[Leased]:
        """Re-lease up to limit deliveries whose lease ran out before now to the caller until
        lease_until, atomically: two rescuers never take the same one."""

    def list_dead(
        self, where: DeadLetterFilter, limit: int, before_id: int | None
    ) -> list[DeadLetterRow]: ...

    def get_dead(self, delivery_id: int) -> DeadLetterRow | None: ...
    def count_dead(self, where: DeadLetterFilter) -> int: ...

    def count_dead_up_to(self, function: str, error_group: str, cap: int) -> int:
        """How many dead letters a function's error group holds, read through its index up
        to cap + 1 of them (cap + 1: more than cap)."""

    def search_dead(
        self, function: str, text: str, before_id: int | None, window: int, limit: int
    ) -> DeadSearchRows:
        """Search the window newest dead letters of a function (older than before_id) for
        errors containing text: the window's size and matches, and the newest matches."""

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

    def count_dedupe_hit(self, function: str, now: float) -> None: ...

    def purge_expired_claims(self, now: float, limit: int) -> int:
        """Delete tx.claim keys and @idempotent records whose expiry has passed; return how many."""

    def purge(self, kind: str, before: float, limit: int) -> dict[str, int]:
        """Delete up to `limit` rows of one kind of history (features.retention.KINDS) older
        than `before` in one short write transaction that gives free pages back; how many.
        Kind "pages" gives up to `limit` free pages back (SQLite), and deletes nothing."""

    def count_purgeable(self, cutoffs: Mapping[str, float]) -> dict[str, int]:
        """What purging each kind before its cutoff would delete, by table."""

    def bucket_sums(self, since: float) -> list[tuple[str, str, int, float, float]]:
        """(function, outcome, attempts, seconds, CPU seconds) since a time (whole hours)."""

    # @idempotent records: one statement each, committed on its own (or in a batch).

    def acquire_idempotency(self, record: IdempotencyRecord, now: float) -> bool:
        """Insert an in-progress record, replacing an expired one; False while a live one is."""

    def acquire_idempotency_many(self, rows: Sequence[IdempotencyRecord], now: float) -> set[str]:
        """acquire_idempotency for many keys (each once) in one statement; the keys acquired."""

    def idempotency_record(self, key: str) -> IdempotencyRecord | None:
        """The record of an @idempotent key, as last committed."""

    def take_over_idempotency(
        self, record: IdempotencyRecord, stale_token: str, lease_ended_by: float
    ) -> bool:
        """Replace the in-progress record of stale_token whose lease_until <= lease_ended_by
        with record; False if that record is gone, completed or held again."""

    def complete_idempotency_many(self, completions: Sequence[IdempotencyCompletion]) -> set[str]:
        """Mark each record completed with its result if its token still holds it, in one
        statement (in this thread's batch if one is open: a worker's turn writes them with
        their attempts); the keys completed."""

    def release_idempotency(self, key: str, token: str) -> bool:
        """Delete the record if token still holds it and it is in progress."""

    def release_idempotency_many(self, held: Sequence[tuple[str, str]]) -> int:
        """Delete each in-progress record (key, the start of its token) at once; how many."""

    # The functions catalogue and the routing of unrouted events (stores/catalogue/sql.py).

    def move_row_changes(self, limit: int) -> int:
        """Move at most `limit` row changes captured by table triggers into the outbox, as
        events marked 'new', in one transaction; how many."""

    def events_to_route(self, routing: str, after: str, limit: int) -> list[StoredEvent]:
        """Events marked `routing` ('new' or 'unrouted') with an id above `after`, by id."""

    def route_events(
        self, routes: Sequence[tuple[str, Sequence[str]]], from_state: str, now: float
    ) -> int:
        """Give each (event id, functions) its deliveries and clear its mark (or mark it
        'unrouted' when no function takes it); how many events got deliveries."""

    def functions_to_route(self) -> list[str]:
        """Names new to the store whose unrouted events are still to be offered to them."""

    def routing_done(self, name: str) -> None:
        """The unrouted events were offered to a new function."""

    def count_unrouted(self) -> int:
        """How many events no function has taken yet."""

    def touch_functions(self, names: Sequence[str], now: float) -> None:
        """A worker serving these functions is alive at now."""

    def function_rows(self) -> list[FunctionRow]:
        """Every stored function with its pending count, by name."""

    def pause_function(self, name: str, now: float, reason: str) -> bool:
        """Pause a function; False if it is unknown or already paused."""

    def resume_function(self, name: str) -> bool:
        """Resume a paused function; False if it is unknown or not paused."""

    def paused_functions(self) -> set[str]:
        """The names of the paused functions."""

    def forget_function(self, name: str, now: float, error: str) -> int | None:
        """Stop routing to a function and make its pending deliveries dead letters; how
        many, or None if the name is not stored."""

    def budget_used(self, function: str, since: float) -> tuple[int, int]:
        """(attempts of a function ended since a time, its deliveries running now)."""

    def failures_after(self, function: str, after: float) -> tuple[int, int]:
        """(attempts of a function ended after a time, how many of them did not succeed)."""
