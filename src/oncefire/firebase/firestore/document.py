"""Documents as `google.cloud.firestore` hands them out: DocumentReference and DocumentSnapshot.

A reference names a path and reads or writes the App's document at once; a snapshot is the
document as one read found it (`get(field)` raises KeyError for a missing field, and gives
None for a missing document, as the client does). A reference asks its client for the
collections it leads to, so that this module needs none of the query modules.
"""

from __future__ import annotations

import copy
import secrets
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from oncefire import documents
from oncefire.clock import to_datetime
from oncefire.errors import ConfigError
from oncefire.events import DocumentSnapshot as Snapshot
from oncefire.transforms import field_names

AUTO_ID_ALPHABET = string.ascii_letters + string.digits
AUTO_ID_LENGTH = 20


def auto_id() -> str:
    """A new document id as Firestore makes them: 20 random letters and digits."""
    return "".join(secrets.choice(AUTO_ID_ALPHABET) for _ in range(AUTO_ID_LENGTH))


class Refs(Protocol):
    """What a reference asks of its client: the database, and references by path."""

    @property
    def database(self) -> documents.Database:
        """The App's document database."""
        ...

    def collection(self, *collection_path: str) -> Any:
        """A CollectionReference by path."""
        ...

    def document(self, *document_path: str) -> DocumentReference:
        """A DocumentReference by path."""
        ...


class Reader(Protocol):
    """A transaction, as a reference reads through it."""

    def read(
        self, reference: DocumentReference, field_paths: Iterable[str] | None
    ) -> DocumentSnapshot:
        """The document, read inside the transaction."""
        ...


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The outcome of one write, as `google.cloud.firestore.WriteResult`."""

    update_time: datetime | None


class DocumentSnapshot:
    """A document as one read found it, as `google.cloud.firestore.DocumentSnapshot`."""

    def __init__(
        self,
        reference: DocumentReference,
        data: dict[str, Any] | None,
        exists: bool,
        read_time: datetime | None,
        create_time: datetime | None,
        update_time: datetime | None,
    ) -> None:
        self._reference = reference
        self._data = copy.deepcopy(data) if exists else None
        self._exists = exists
        self.read_time = read_time
        self.create_time = create_time
        self.update_time = update_time

    @classmethod
    def of(cls, reference: DocumentReference, snapshot: Snapshot) -> DocumentSnapshot:
        """The snapshot of an oncefire read, read now."""
        now = to_datetime(reference.client.database.clock.now())
        data = snapshot.to_dict()
        return cls(
            reference, data, snapshot.exists, now, snapshot.create_time, snapshot.update_time
        )

    @property
    def exists(self) -> bool:
        """Whether the document existed when it was read."""
        return self._exists

    @property
    def id(self) -> str:
        """The document's id."""
        return self._reference.id

    @property
    def reference(self) -> DocumentReference:
        """A reference to the document."""
        return self._reference

    def get(self, field_path: str) -> Any:
        """A copy of a field by dotted path; KeyError when it is missing, None for a
        document that does not exist."""
        if self._data is None:
            return None
        value: Any = self._data
        for name in field_names(field_path):
            if not isinstance(value, dict) or name not in value:
                raise KeyError(field_path)
            value = value[name]
        return copy.deepcopy(value)

    def to_dict(self) -> dict[str, Any] | None:
        """A copy of the fields, or None for a missing document."""
        return copy.deepcopy(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DocumentSnapshot):
            return NotImplemented
        return self._reference == other._reference and self._data == other._data

    def __hash__(self) -> int:
        return hash((self._reference, self.update_time))

    def __repr__(self) -> str:
        return f"DocumentSnapshot({self._reference.path!r}, exists={self._exists})"


class DocumentReference:
    """A handle to one document, as `google.cloud.firestore.DocumentReference`."""

    def __init__(self, client: Refs, path: str) -> None:
        self.client = client
        self._ref = client.database.document(path)

    @property
    def id(self) -> str:
        """The document's id."""
        return self._ref.id

    @property
    def path(self) -> str:
        """The document's path, such as 'users/alovelace'."""
        return self._ref.path

    @property
    def parent(self) -> Any:
        """The CollectionReference holding the document."""
        return self.client.collection(self._ref.parent.path)

    def collection(self, collection_id: str) -> Any:
        """A CollectionReference to a sub-collection of the document."""
        return self.client.collection(self.path, collection_id)

    def get(
        self,
        field_paths: Iterable[str] | None = None,
        transaction: Reader | None = None,
        **_: Any,
    ) -> DocumentSnapshot:
        """The document now (inside `transaction` if given); field_paths keeps only those."""
        if transaction is not None:
            return transaction.read(self, field_paths)
        snapshot = DocumentSnapshot.of(self, self._ref.get())
        return snapshot if field_paths is None else project(snapshot, field_paths)

    def set(self, document_data: dict[str, Any], merge: bool = False, **_: Any) -> WriteResult:
        """Create or replace (or, with merge=True, merge into) the document."""
        self._ref.set(document_data, merge=merge)
        return self._written()

    def create(self, document_data: dict[str, Any], **_: Any) -> WriteResult:
        """Create the document; fail if it exists."""
        self._ref.create(document_data)
        return self._written()

    def update(self, field_updates: dict[str, Any], option: Any = None, **_: Any) -> WriteResult:
        """Change fields of the existing document (dotted paths, transforms, DELETE_FIELD)."""
        self._ref.update(field_updates)
        return self._written()

    def delete(self, option: Any = None, **_: Any) -> datetime:
        """Delete the document (a missing one too); the time of the request."""
        self._ref.delete()
        return self._written().update_time or to_datetime(0)

    def collections(self, page_size: int | None = None, **_: Any) -> Iterator[Any]:
        """The sub-collections of the document that hold documents."""
        prefix = self.path + "/"
        with self.client.database.reading() as tx:
            names = tx.collection_names(prefix)
        ids = sorted({name[len(prefix) :].split("/", 1)[0] for name in names})
        for collection_id in ids:
            yield self.collection(collection_id)

    def on_snapshot(self, callback: Any) -> Any:
        """Listeners are not offered: see listening_is_not_offered."""
        listening_is_not_offered()

    def _written(self) -> WriteResult:
        return WriteResult(to_datetime(self.client.database.clock.now()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DocumentReference) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"DocumentReference({self.path!r})"


def project(snapshot: DocumentSnapshot, field_paths: Iterable[str]) -> DocumentSnapshot:
    """The snapshot with only these dotted field paths (select(), get(field_paths=...))."""
    data = snapshot.to_dict()
    if data is None:
        return snapshot
    kept: dict[str, Any] = {}
    for path in field_paths:
        names = field_names(path)
        value: Any = data
        for name in names:
            if not isinstance(value, dict) or name not in value:
                break
            value = value[name]
        else:
            node = kept
            for name in names[:-1]:
                node = node.setdefault(name, {})
            node[names[-1]] = value
    return DocumentSnapshot(
        snapshot.reference,
        kept,
        True,
        snapshot.read_time,
        snapshot.create_time,
        snapshot.update_time,
    )


def listening_is_not_offered() -> None:
    """Raise the error of on_snapshot: real-time listeners have no counterpart here."""
    raise ConfigError(
        "on_snapshot (a real-time listener) is not offered: react to writes with a "
        "firestore_fn trigger (on_document_written) instead."
    )
