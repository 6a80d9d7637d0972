"""Documents, Firestore-shaped: the database of an App (`app.db`), its collections and
document references."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from oncefire import transforms
from oncefire.clock import Clock
from oncefire.events import DocumentSnapshot
from oncefire.features import usage
from oncefire.model import codec, fencing, paths
from oncefire.model.lineage import carries_context
from oncefire.model.outbox import document_subscribers
from oncefire.model.query_plan import Shape
from oncefire.query import Query
from oncefire.stores.catalogue.cache import Fanout

if TYPE_CHECKING:
    from oncefire.stores.catalogue.cache import Catalog
    from oncefire.stores.documents.contract import Documents, DocumentTx


from oncefire.documents.transaction import Transaction, check_fields, index_entries


class DocumentReference:
    """A handle to one document path; reads and writes go to the store at once."""

    def __init__(self, db: Database, path: str) -> None:
        self._db = db
        self.path = paths.document_path(path)

    @property
    def id(self) -> str:
        """The document's id."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def parent(self) -> CollectionReference:
        """The collection that holds this document."""
        return CollectionReference(self._db, paths.parent_of(self.path))

    def collection(self, name: str) -> CollectionReference:
        """A sub-collection of this document."""
        return CollectionReference(self._db, f"{self.path}/{paths.check_id(name, 'collection id')}")

    def get(self) -> DocumentSnapshot:
        """The document now (exists=False if missing)."""
        usage.count_reads(1)
        with self._db.reading() as tx:
            return DocumentSnapshot.from_stored(self.path, tx.get_document(self.path))

    def set(self, data: dict[str, Any], *, merge: bool = False) -> None:
        """Create or replace the document, with its events, in one transaction."""
        if merge is False and self._db._set_at_once(self.path, data):
            return
        with self._db.transaction() as tx:
            tx.set(self, data, merge=merge)

    def create(self, data: dict[str, Any]) -> None:
        """Create the document; fail if it exists."""
        with self._db.transaction() as tx:
            tx.create(self, data)

    def update(self, fields: dict[str, Any]) -> None:
        """Change fields of the existing document."""
        with self._db.transaction() as tx:
            tx.update(self, fields)

    def delete(self) -> None:
        """Delete the document."""
        with self._db.transaction() as tx:
            tx.delete(self)

    def __repr__(self) -> str:
        return f"DocumentReference({self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DocumentReference) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)


class CollectionReference(Query):
    """A collection: make references, add documents, query."""

    _db: Database  # the Reader a query needs, and the whole database

    def __init__(self, db: Database, path: str) -> None:
        super().__init__(db, paths.collection_path(path))

    @property
    def id(self) -> str:
        """The collection's id."""
        return self.path.rsplit("/", 1)[-1]

    def document(self, doc_id: str | None = None) -> DocumentReference:
        """A reference to a document of this collection (a new id when none is given)."""
        if doc_id is None:
            doc_id = codec.new_id(self._db.clock.now()).replace("-", "")
        return DocumentReference(self._db, f"{self.path}/{paths.check_id(doc_id, 'document id')}")

    def add(self, data: dict[str, Any]) -> DocumentReference:
        """Create a document with a generated id; return its reference."""
        ref = self.document()
        ref.create(data)
        return ref

    def index(self, field: str) -> None:
        """Keep an index of a field, so equality queries on it do not scan the collection."""
        transforms.field_names(field, "index field")

        def entries_of(docs: Iterator[tuple[str, dict[str, Any]]]) -> dict[str, str]:
            return {
                path: key
                for path, rec in docs
                for key in index_entries(rec["data"], [field]).values()
            }

        self._db.store.declare_index(self.path, field, entries_of)


class _Local(threading.local):
    """A thread's open transaction, None by default (read without getattr's AttributeError)."""

    tx: Transaction | None = None


class Database:
    """The document store of an App: `app.db`."""

    def __init__(self, store: Documents, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._local = _Local()
        self.warned_shapes: set[Shape] = set()  # queries logged as reading a whole collection

    def collection(self, path: str) -> CollectionReference:
        """A collection by path ('orders' or 'orders/o1/items')."""
        return CollectionReference(self, path)

    def document(self, path: str) -> DocumentReference:
        """A document by path ('orders/o1')."""
        return DocumentReference(self, path)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Serializable read-write transaction: commits on exit, rolls back on an exception.

        A write made through a reference inside the block joins the transaction."""
        active: Transaction | None = self._local.tx
        if active is not None:
            yield active
            return
        with self.store.transaction() as raw:
            check_lease = fencing.hold(raw)  # in a function: commit only under its lease
            tx = self._local.tx = Transaction(self, raw)
            try:
                yield tx
                check_lease()
            finally:
                tx.is_open = False
                self._local.tx = None

    def active_transaction(self) -> Transaction | None:
        """The transaction this thread has open, if any."""
        return self._local.tx

    @contextmanager
    def reading(self) -> Iterator[DocumentTx]:
        """The open transaction of this thread if any, else a read snapshot."""
        active: Transaction | None = self._local.tx
        if active is not None:
            yield active._check()
            return
        with self.store.read() as raw:
            yield raw

    def _set_at_once(self, path: str, data: dict[str, Any]) -> bool:
        """Replace a whole document outside any transaction by the store's own write
        (Store.set_document: on PostgreSQL one statement, one round trip instead of two; on
        SQLite one transaction of the write's statements alone), with what needs no store
        made before its lock is taken: the fields checked, the transforms resolved, the JSON
        encoded, the event's id. False if it must be a transaction: inside one, when its event
        carries a lineage or an author (lineage.carries_context), or when the store declines.

        The store decides created/updated/no-op under the same locks a transaction takes,
        with the catalogue (functions, index fields) as of its write.
        """
        if self._local.tx is not None or carries_context():
            return False
        check_fields(data)
        now = self.clock.now()
        new = transforms.resolve(data, now)
        data_json = codec.encode_document(new)
        collection = paths.parent_of(path)

        def fanout_of(catalog: Catalog) -> Fanout | None:
            starts = document_subscribers(catalog.functions, path)
            if starts is None:
                return None  # which functions an update starts depends on the old document
            fields = catalog.fields_of(collection)
            return Fanout(*starts, index_entries(new, fields) if fields else None)

        is_written = self.store.set_document(path, data_json, now, codec.new_id(now), fanout_of)
        if is_written:  # False: the transaction it falls back to counts the write
            usage.count_write()
        return is_written

    def run_transaction(self, body: Callable[[Transaction], Any]) -> Any:
        """Run body(tx) in a transaction and return what it returns."""
        with self.transaction() as tx:
            return body(tx)
