"""Documents and their transaction: what a store does for oncefire.documents and queries.

DocumentTx is one serializable transaction: documents, their index entries, the outbox
(events and their deliveries, written with the document), tx.claim keys, schedule ticks and
the lease that fences the transaction. Documents opens them, writes a whole document in one
step, declares indexes and finds the paths a TTL policy deletes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from oncefire.events import StoredEvent
from oncefire.stores.catalogue.types import Catalog, Fanout, FunctionEntry
from oncefire.stores.documents.ticks import TickTx
from oncefire.stores.queue.lease_tx import LeaseTx


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


class Documents(Protocol):
    """Document transactions, whole-document writes, indexes and TTL paths."""

    def transaction(self) -> AbstractContextManager[DocumentTx]:
        """A serializable write transaction: commits on exit, rolls back on an exception."""

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
