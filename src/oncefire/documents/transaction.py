"""A document transaction: reads, writes, tx.claim and tx.publish, committed together with
the events the writes cause (the transactional outbox)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from oncefire import transforms
from oncefire.errors import (
    ConfigError,
    DocumentNotFoundError,
    InvalidDocumentError,
    TransactionError,
)
from oncefire.events import CURRENT_APP, CURRENT_EVENT, DocumentSnapshot, EventType
from oncefire.features import usage
from oncefire.model import codec, paths
from oncefire.model.messages import message_payload
from oncefire.model.outbox import emit
from oncefire.query import index_key
from oncefire.retry import is_real

if TYPE_CHECKING:
    from oncefire.clock import Clock
    from oncefire.stores.documents.contract import DocumentTx


class HasPath(Protocol):
    """A document reference, as a transaction uses it: its path."""

    path: str


class HasClock(Protocol):
    """The database a transaction belongs to, as it uses it: its clock."""

    clock: Clock


class Transaction:
    """Reads and writes that commit together (or not at all), with their events."""

    def __init__(self, db: HasClock, tx: DocumentTx) -> None:
        self._db = db
        self._tx = tx
        self.is_open = True

    def _check(self) -> DocumentTx:
        if not self.is_open:
            raise TransactionError("This transaction has ended: open a new one to write.")
        return self._tx

    def get(self, ref: HasPath) -> DocumentSnapshot:
        """Read a document inside the transaction."""
        usage.count_reads(1)
        return DocumentSnapshot.from_stored(ref.path, self._check().get_document(ref.path))

    def set(self, ref: HasPath, data: dict[str, Any], *, merge: bool = False) -> None:
        """Create or replace a document (merge=True merges fields into an existing one)."""
        tx = self._check()
        check_fields(data, merge)
        usage.count_write()
        now = self._db.clock.now()
        current = tx.get_document(ref.path)
        if merge and current is not None:
            new = transforms.merge(current["data"], data, now)
        else:
            new = transforms.merge({}, data, now) if merge else transforms.resolve(data, now)
        self._write(tx, ref.path, current, new, now)

    def create(self, ref: HasPath, data: dict[str, Any]) -> None:
        """Create a document; fail if it exists."""
        tx = self._check()
        if tx.get_document(ref.path) is not None:
            raise InvalidDocumentError(f"Document {ref.path!r} already exists.")
        self.set(ref, data)

    def update(self, ref: HasPath, fields: dict[str, Any]) -> None:
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

    def delete(self, ref: HasPath) -> None:
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
            tx.set_index_entries(path, collection, index_entries(new, fields))
        after = {"data": new, "create_time": created, "update_time": now}
        before = None if current is None else codec.dumps(current)
        event_json = codec.document_event(before, data_json, created, now)
        event_type = EventType.DOCUMENT_UPDATED if current else EventType.DOCUMENT_CREATED
        self._emit(tx, event_type, path, current, after, event_json)

    def _emit(
        self,
        tx: DocumentTx,
        event_type: str,
        path: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        data_json: str | None = None,
    ) -> None:
        emit(
            tx,
            event_type=event_type,
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


def check_fields(data: Any, merge: bool = False) -> None:
    if not isinstance(merge, bool):
        raise InvalidDocumentError(f"set(merge={merge!r}): merge is True or False.")
    if not isinstance(data, dict):
        raise InvalidDocumentError(
            f"Document data must be a dict of fields; got {type(data).__name__}."
        )


def index_entries(data: dict[str, Any], fields: list[str]) -> dict[str, str]:
    entries = {}
    for name in fields:
        value = DocumentSnapshot("x/x", True, data).get(name, _MISSING)
        if value is not _MISSING:
            entries[name] = index_key(value)
    return entries


_MISSING = object()
