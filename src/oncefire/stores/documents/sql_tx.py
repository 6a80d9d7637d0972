"""Document and outbox operations inside one store transaction, the same on both databases;
the dialect subclasses read a document, load the catalogue and append events their way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from oncefire.events import StoredEvent
from oncefire.model import codec
from oncefire.model.buckets import hour_of
from oncefire.model.paths import parent_of
from oncefire.model.totals import LOOP_STOPPED
from oncefire.stores.catalogue.cache import Catalog, CatalogCache
from oncefire.stores.catalogue.types import FunctionEntry
from oncefire.stores.connection import Statements
from oncefire.stores.queue.types import Lease

PAST_TEXT = "\U0010ffff"  # sorts after every character: prefix + PAST_TEXT ends a prefix's range


class SqlTx:
    """The DocumentTx operations shared by SqliteTx and PostgresTx."""

    def __init__(self, statements: Statements, catalogs: CatalogCache | None) -> None:
        self.statements = statements
        self._catalogs = catalogs or CatalogCache()
        # Checked once a transaction: a transaction sees one snapshot of the catalogue.
        self._catalog: Catalog | None = None

    # -- what each dialect does its own way ----------------------------------------------

    def _decode(self, data: Any) -> Any:
        """A document's data as a row holds it, decoded."""
        raise NotImplementedError

    def _load_catalog(self, version: int) -> Catalog:
        """The catalogue, read in this transaction at or after it read `version`."""
        raise NotImplementedError

    def get_document(self, path: str) -> dict[str, Any] | None:
        """{'data', 'create_time', 'update_time'} of a document, or None."""
        raise NotImplementedError

    def append(
        self,
        event: StoredEvent,
        functions: Sequence[str],
        run_at: float,
        *,
        is_new: bool = False,
        data_json: str | None = None,
    ) -> bool:
        """Insert an event (once) and one pending delivery per function."""
        raise NotImplementedError

    def add_deliveries(self, event_id: str, functions: Sequence[str], run_at: float) -> list[int]:
        """New pending deliveries of an existing event (a redelivery); their ids."""
        raise NotImplementedError

    # -- the same on both ----------------------------------------------------------------

    def _catalog_now(self) -> Catalog:
        if self._catalog is None:
            ((version,),) = self.statements.fetch("catalog_version")
            return self.catalog_at(int(version))
        return self._catalog

    def catalog_at(self, version: int) -> Catalog:
        """The catalogue at `version`, which this transaction has just read: the one kept
        between transactions while the version stays the same, else read here."""
        self._catalog = self._catalogs.at(version, self._load_catalog)
        return self._catalog

    def functions(self) -> list[FunctionEntry]:
        """The registered functions, as of this transaction's catalogue."""
        return list(self._catalog_now().functions)

    def index_fields(self, collection: str) -> list[str]:
        """The declared index fields of a collection (a write keeps their entries)."""
        return self._catalog_now().fields_of(collection)

    def complete_index_fields(self, collection: str) -> list[str]:
        """The index fields of a collection a query can use (fully built)."""
        return self._catalog_now().complete_fields_of(collection)

    def put_document(
        self, path: str, collection: str, data_json: str, create_time: float, update_time: float
    ) -> None:
        """Insert or replace a document (its create_time is kept on a replace)."""
        self.statements.execute(
            "put_document",
            {
                "path": path,
                "collection": collection,
                "data": data_json,
                "create_time": create_time,
                "update_time": update_time,
                # PostgreSQL's one-statement write counts an update's `before` by it; NULL
                # (jsonb would not give the data back as written) sends that update here.
                "data_size": len(data_json.encode()) if codec.is_jsonb_exact(data_json) else None,
            },
        )

    def delete_document(self, path: str) -> None:
        """Delete a document and its index entries."""
        args = {"path": path, "collection": parent_of(path)}
        self.statements.execute("delete_document", args)
        self.statements.execute("delete_index_entries", args)

    def list_documents(
        self, collection: str, equals: tuple[str, str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(path, record) of a collection; `equals` (field, value key) uses a declared index."""
        if equals is None:
            rows = self.statements.fetch("list_documents", {"collection": collection})
        else:
            field, value = equals
            rows = self.statements.fetch(
                "list_documents_equal", {"collection": collection, "field": field, "value": value}
            )
        for path, data, created, updated in rows:
            yield path, {"data": self._decode(data), "create_time": created, "update_time": updated}

    def documents_page(
        self, collection: str, after: str, limit: int
    ) -> list[tuple[str, dict[str, Any]]]:
        """(path, record) of at most limit documents of a collection whose path sorts after
        `after`, in path order."""
        args = {"collection": collection, "after": after, "limit": limit}
        return [
            (path, {"data": self._decode(data), "create_time": created, "update_time": updated})
            for path, data, created, updated in self.statements.fetch("documents_page", args)
        ]

    def collection_names(self, prefix: str) -> list[str]:
        """The paths of the collections that start with prefix and hold a document, in
        order: one index seek a collection, whatever the number of documents."""
        args = {"prefix": prefix, "prefix_end": prefix + PAST_TEXT}
        return [name for (name,) in self.statements.fetch("collection_names", args)]

    def index_page(
        self,
        collection: str,
        field: str,
        key_range: tuple[str, str],
        after: tuple[str, str],
        is_desc: bool,
        limit: int,
    ) -> list[tuple[str, dict[str, Any], str]]:
        """(path, record, key) of at most limit documents whose key of field lies in
        key_range, walking the field's index by (key, path) from past `after`."""
        args = {
            "collection": collection,
            "field": field,
            "lo": key_range[0],
            "hi": key_range[1],
            "after_value": after[0],
            "after_path": after[1],
            "limit": limit,
        }
        rows = self.statements.fetch("index_page_desc" if is_desc else "index_page_asc", args)
        return [
            (
                path,
                {"data": self._decode(data), "create_time": created, "update_time": updated},
                key,
            )
            for path, data, created, updated, key in rows
        ]

    def set_index_entries(self, path: str, collection: str, entries: dict[str, str]) -> None:
        """Replace the index entries (field -> value key) of a document."""
        self.statements.execute("delete_index_entries", {"path": path})
        self.statements.execute_many(
            "insert_index_entry",
            [
                {"collection": collection, "field": f, "value": v, "path": path}
                for f, v in entries.items()
            ],
        )

    def bury_event(self, event_id: str, error: str, now: float) -> None:
        """Make the pending deliveries of an event just appended dead letters, with error (a
        loop stopped), and count them in the totals."""
        args = {"event_id": event_id, "error": error, "now": now}
        stopped = Counter(str(r[0]) for r in self.statements.fetch("bury_event", args))
        rows = [{"function": f, "kind": LOOP_STOPPED, "count": n} for f, n in stopped.items()]
        if rows:
            self.statements.execute_many("add_to_total", rows)

    def mark_routed(self, event_id: str, from_state: str, to_state: str | None) -> bool:
        """Move an event's routing mark from from_state to to_state; False if it moved on."""
        args = {"id": event_id, "from": from_state, "to": to_state}
        return bool(self.statements.fetch("mark_routed", args))

    def claim_key(self, key: str, now: float, expires_at: float) -> bool:
        """Record a tx.claim key; False if a live record of it exists."""
        rows = self.statements.fetch(
            "claim_key", {"key": key, "now": now, "expires_at": expires_at}
        )
        return bool(rows)

    def count_dedupe_hit(self, function: str, now: float) -> None:
        """Count one duplicate skipped by an idempotency helper."""
        args = {"function": function, "now": now, "hour": hour_of(now)}
        self.statements.execute("count_dedupe_hit", args)

    def tick_after(self, function: str, since: float) -> float:
        """A schedule's last tick handled; when there is none yet, `since`, recorded as such."""
        rows = self.statements.fetch("tick_after", {"function": function, "since": since})
        return float(rows[0][0])

    def hold_lease(self, lease: Lease) -> Callable[[], bool]:
        """Check that the delivery is still running under lease (SQLite's write lock, taken at
        BEGIN IMMEDIATE, holds the row for the transaction)."""
        rows = self.statements.fetch("hold_lease", {"id": lease.delivery_id, "token": lease.token})
        return lambda: bool(rows)

    def record_tick(self, function: str, tick: float) -> None:
        """Record a schedule's tick as handled (one before the recorded tick changes nothing)."""
        self.statements.execute("record_tick", {"function": function, "tick": tick})


def statements_of(tx: object) -> Statements:
    """The named statements of a SQL store's transaction, for the store's own modules that
    run a statement beside the DocumentTx calls (the same statement layer, fault hooks too)."""
    if not isinstance(tx, SqlTx):
        raise TypeError(f"{type(tx).__name__} is not a SQL store's transaction.")
    return tx.statements
