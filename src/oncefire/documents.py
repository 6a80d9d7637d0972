"""Documents, Firestore-shaped: collections, references, queries and transactions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from oncefire import transforms
from oncefire.clock import Clock
from oncefire.errors import (
    ConfigError,
    DocumentNotFoundError,
    InvalidDocumentError,
    TransactionError,
)
from oncefire.events import CURRENT_APP, CURRENT_EVENT, DocumentSnapshot, EventType
from oncefire.features import usage
from oncefire.model import codec, fencing, paths
from oncefire.model.lineage import carries_context
from oncefire.model.messages import message_payload
from oncefire.model.outbox import document_subscribers, emit
from oncefire.model.query_plan import Shape
from oncefire.query import Query, index_key
from oncefire.retry import is_real
from oncefire.stores.catalogue.cache import Fanout

if TYPE_CHECKING:
    from oncefire.stores.catalogue.cache import Catalog
    from oncefire.stores.documents.contract import Documents, DocumentTx


class Transaction:
    """Reads and writes that commit together (or not at all), with their events."""

    def __init__(self, db: Database, tx: DocumentTx) -> None:
        self._db = db
        self._tx = tx
        self.is_open = True

    def _check(self) -> DocumentTx:
        if not self.is_open:
            raise TransactionError("This transaction has ended: open a new one to write.")
        return self._tx

    def get(self, ref: DocumentReference) -> DocumentSnapshot:
        """Read a document inside the transaction."""
        usage.count_reads(1)
        return DocumentSnapshot.from_stored(ref.path, self._check().get_document(ref.path))

    def set(self, ref: DocumentReference, data: dict[str, Any], *, merge: bool = False) -> None:
        """Create or replace a document (merge=True merges fields into an existing one)."""
        tx = self._check()
        _check_fields(data, merge)
        usage.count_write()
        now = self._db.clock.now()
        current = tx.get_document(ref.path)
        if merge and current is not None:
            new = transforms.merge(current["data"], data, now)
        else:
            new = transforms.merge({}, data, now) if merge else transforms.resolve(data, now)
        self._write(tx, ref.path, current, new, now)

    def create(self, ref: DocumentReference, data: dict[str, Any]) -> None:
        """Create a document; fail if it exists."""
        tx = self._check()
        if tx.get_document(ref.path) is not None:
            raise InvalidDocumentError(f"Document {ref.path!r} already exists.")
        self.set(ref, data)

    def update(self, ref: DocumentReference, fields: dict[str, Any]) -> None:
        """Change fields of an existing document (dotted paths, transforms, DELETE_FIELD)."""
        tx = self._check()
        if not isinstance(fields, dict) or not fields:
            raise InvalidDocumentError("update() takes a non-empty dict of field paths to values.")
        usage.count_write()
        current = tx.get_document(ref.path)
        if current is None:
            raise DocumentNotFoundError(
                f"Cannot update {ref.path!r}: it does not exist. Use set() to create it."
            )
        now = self._db.clock.now()
        new = transforms.apply_update(current["data"], fields, now)
        self._write(tx, ref.path, current, new, now)

    def delete(self, ref: DocumentReference) -> None:
        """Delete a document (deleting a missing one does nothing)."""
        tx = self._check()
        usage.count_write()
        current = tx.get_document(ref.path)
        if current is None:
            return
        tx.delete_document(ref.path)
        self._emit(tx, EventType.DOCUMENT_DELETED, ref.path, current, None)

    def claim(self, key: str, *, ttl: float = 7 * 86400) -> bool:
        """Claim an idempotency key with this transaction's writes; False if already claimed."""
        tx = self._check()
        if not isinstance(key, str) or not key or "\x00" in key:
            raise InvalidDocumentError(
                f"claim({key!r}): a claim key is a non-empty string without NUL characters."
            )
        if not is_real(ttl) or ttl <= 0:
            raise InvalidDocumentError(
                f"claim(ttl={ttl!r}): use a positive, finite number of seconds."
            )
        current = CURRENT_EVENT.get()
        if current is not None:
            _check_claim_ttl(current.function, ttl)
        now = self._db.clock.now()
        usage.count_write()
        is_new = tx.claim_key(key, now, now + ttl)
        if not is_new and current is not None:
            tx.count_dedupe_hit(current.function, now)
        return is_new

    def publish(self, topic: str, data: Any, attributes: dict[str, str] | None = None) -> str:
        """Publish a message on a topic with this transaction: delivered only if it commits."""
        tx = self._check()
        payload = message_payload(topic, data, attributes)
        usage.count_write()
        event = emit(
            tx,
            event_type=EventType.MESSAGE_PUBLISHED,
            source=topic,
            data=payload,
            now=self._db.clock.now(),
        )
        assert event is not None  # a new id is never a duplicate
        return event.id

    def _write(
        self,
        tx: DocumentTx,
        path: str,
        current: dict[str, Any] | None,
        new: dict[str, Any],
        now: float,
    ) -> None:
        data_json = codec.encode_document(new)
        if current is not None and codec.canonical(current["data"]) == codec.canonical(new):
            return  # a no-op write changes nothing and emits no event
        collection = paths.parent_of(path)
        created = current["create_time"] if current else now
        tx.put_document(path, collection, data_json, created, now)
        fields = tx.index_fields(collection)
        if fields:
            tx.set_index_entries(path, collection, _index_entries(new, fields))
        after = {"data": new, "create_time": created, "update_time": now}
        before = None if current is None else codec.dumps(current)
        event_json = codec.document_event(before, data_json, created, now)
        kind = EventType.DOCUMENT_UPDATED if current else EventType.DOCUMENT_CREATED
        self._emit(tx, kind, path, current, after, event_json)

    def _emit(
        self,
        tx: DocumentTx,
        kind: str,
        path: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        data_json: str | None = None,
    ) -> None:
        emit(
            tx,
            event_type=kind,
            source=path,
            data={"before": before, "after": after},
            now=self._db.clock.now(),
            data_json=data_json,
        )


def _check_claim_ttl(function: str, ttl: float) -> None:
    """Refuse a claim the store would forget while the running function's event may still be
    delivered again: the redelivery would claim the key anew and repeat the effect."""
    app = CURRENT_APP.get()
    trigger = None if app is None else app.triggers.get(function)
    if trigger is None:
        return
    minimum = trigger.options.redelivery_window()
    if ttl < minimum:
        raise ConfigError(
            f"tx.claim(ttl={ttl:g}) in {function!r} could forget the key before the event's "
            f"last redelivery: use a ttl of at least {minimum:g} s (max_event_age plus the retry "
            "window), as @idempotent and retention require."
        )


def _check_fields(data: Any, merge: bool = False) -> None:
    if not isinstance(merge, bool):
        raise InvalidDocumentError(f"set(merge={merge!r}): merge is True or False.")
    if not isinstance(data, dict):
        raise InvalidDocumentError(
            f"Document data must be a dict of fields; got {type(data).__name__}."
        )


def _index_entries(data: dict[str, Any], fields: list[str]) -> dict[str, str]:
    entries = {}
    for name in fields:
        value = DocumentSnapshot("x/x", True, data).get(name, _MISSING)
        if value is not _MISSING:
            entries[name] = index_key(value)
    return entries


_MISSING = object()


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
                for key in _index_entries(rec["data"], [field]).values()
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
        _check_fields(data)
        now = self.clock.now()
        new = transforms.resolve(data, now)
        data_json = codec.encode_document(new)
        collection = paths.parent_of(path)

        def fanout_of(catalog: Catalog) -> Fanout | None:
            starts = document_subscribers(catalog.functions, path)
            if starts is None:
                return None  # which functions an update starts depends on the old document
            fields = catalog.fields_of(collection)
            return Fanout(*starts, _index_entries(new, fields) if fields else None)

        is_written = self.store.set_document(path, data_json, now, codec.new_id(now), fanout_of)
        if is_written:  # False: the transaction it falls back to counts the write
            usage.count_write()
        return is_written

    def run_transaction(self, body: Callable[[Transaction], Any]) -> Any:
        """Run body(tx) in a transaction and return what it returns."""
        with self.transaction() as tx:
            return body(tx)
