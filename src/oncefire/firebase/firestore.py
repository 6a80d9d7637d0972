"""A database handle shaped like `firebase_admin.firestore.client()`, over the App's documents.

The shapes Firebase code relies on: `collection(...).add(data)` returns `(update_time, ref)`,
a snapshot has `.reference` and its `.get(field)` raises KeyError for a missing field,
`where(filter=FieldFilter(...))` works beside `where(field, op, value)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oncefire import documents, query
from oncefire.events import DocumentSnapshot as Snapshot
from oncefire.firebase.defaults import current_app
from oncefire.transforms import DELETE_FIELD, SERVER_TIMESTAMP, Increment

__all__ = [
    "DELETE_FIELD",
    "SERVER_TIMESTAMP",
    "Client",
    "CollectionReference",
    "DocumentReference",
    "DocumentSnapshot",
    "FieldFilter",
    "Increment",
    "Query",
    "client",
]


def client(app: Any = None) -> Client:
    """The document database of the App running this code (the default App outside one)."""
    return Client((app or current_app()).db)


@dataclass(frozen=True, slots=True)
class FieldFilter:
    """A where() condition, as `google.cloud.firestore.FieldFilter`."""

    field_path: str
    op_string: str
    value: Any


class DocumentSnapshot:
    """A document as it was, with Firestore's `.reference` and a `.get` that raises KeyError."""

    def __init__(self, snapshot: Snapshot, db: documents.Database) -> None:
        self._snapshot = snapshot
        self._db = db

    @property
    def id(self) -> str:
        """The document's id."""
        return self._snapshot.id

    @property
    def exists(self) -> bool:
        """Whether the document existed."""
        return self._snapshot.exists

    @property
    def reference(self) -> DocumentReference:
        """A reference to the document."""
        return DocumentReference(self._db.document(self._snapshot.path))

    @property
    def create_time(self) -> datetime | None:
        """When the document was created."""
        return self._snapshot.create_time

    @property
    def update_time(self) -> datetime | None:
        """When the document was last written."""
        return self._snapshot.update_time

    def to_dict(self) -> dict[str, Any] | None:
        """A copy of the fields, or None for a missing document."""
        return self._snapshot.to_dict()

    def get(self, field_path: str) -> Any:
        """A field by dotted path; KeyError when it is missing, as in Firestore."""
        missing = object()
        value = self._snapshot.get(field_path, missing)
        if value is missing:
            raise KeyError(field_path)
        return value

    def __repr__(self) -> str:
        return f"DocumentSnapshot({self._snapshot.path!r}, exists={self.exists})"


class DocumentReference:
    """A handle to one document, as `google.cloud.firestore.DocumentReference`."""

    def __init__(self, ref: documents.DocumentReference) -> None:
        self._ref = ref

    @property
    def id(self) -> str:
        """The document's id."""
        return self._ref.id

    @property
    def path(self) -> str:
        """The document's path."""
        return self._ref.path

    @property
    def parent(self) -> CollectionReference:
        """The collection holding the document."""
        return CollectionReference(self._ref.parent)

    def collection(self, collection_id: str) -> CollectionReference:
        """A sub-collection of the document."""
        return CollectionReference(self._ref.collection(collection_id))

    def get(self) -> DocumentSnapshot:
        """The document now."""
        return DocumentSnapshot(self._ref.get(), self._ref._db)

    def set(self, document_data: dict[str, Any], merge: bool = False) -> None:
        """Create or replace (or merge into) the document."""
        self._ref.set(document_data, merge=merge)

    def create(self, document_data: dict[str, Any]) -> None:
        """Create the document; fail if it exists."""
        self._ref.create(document_data)

    def update(self, field_updates: dict[str, Any]) -> None:
        """Change fields of the existing document."""
        self._ref.update(field_updates)

    def delete(self) -> None:
        """Delete the document."""
        self._ref.delete()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DocumentReference) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"DocumentReference({self.path!r})"


class Query:
    """A query, as `google.cloud.firestore.Query`: where/order_by/limit, stream() and get()."""

    ASCENDING = "ASCENDING"
    DESCENDING = "DESCENDING"

    def __init__(self, inner: query.Query, db: documents.Database) -> None:
        self._inner = inner
        self._db = db

    def where(
        self,
        field_path: str | None = None,
        op_string: str | None = None,
        value: Any = None,
        *,
        filter: FieldFilter | None = None,  # Firestore's keyword, though it shadows a builtin
    ) -> Query:
        """Keep documents matching a condition (positional, or filter=FieldFilter(...))."""
        if filter is not None:
            field_path, op_string, value = filter.field_path, filter.op_string, filter.value
        return Query(self._inner.where(str(field_path), str(op_string), value), self._db)

    def order_by(self, field_path: str, direction: str = ASCENDING) -> Query:
        """Sort by a field."""
        return Query(self._inner.order_by(field_path, direction), self._db)

    def limit(self, count: int) -> Query:
        """At most count documents."""
        return Query(self._inner.limit(count), self._db)

    def stream(self) -> Iterator[DocumentSnapshot]:
        """The matching documents, in order."""
        for snapshot in self._inner.stream():
            yield DocumentSnapshot(snapshot, self._db)

    def get(self) -> list[DocumentSnapshot]:
        """The matching documents as a list."""
        return list(self.stream())


class CollectionReference(Query):
    """A collection, as `google.cloud.firestore.CollectionReference`."""

    def __init__(self, ref: documents.CollectionReference) -> None:
        super().__init__(ref, ref._db)
        self._ref = ref

    @property
    def id(self) -> str:
        """The collection's id."""
        return self._ref.id

    def document(self, document_id: str | None = None) -> DocumentReference:
        """A reference to a document of the collection (a new id when none is given)."""
        return DocumentReference(self._ref.document(document_id))

    def add(
        self, document_data: dict[str, Any], document_id: str | None = None
    ) -> tuple[datetime | None, DocumentReference]:
        """Create a document; return (its update time, its reference), as Firestore does."""
        ref = self._ref.document(document_id)
        ref.create(document_data)
        return ref.get().update_time, DocumentReference(ref)


class Client:
    """The document database, as `google.cloud.firestore.Client`."""

    def __init__(self, db: documents.Database) -> None:
        self._db = db

    def collection(self, collection_path: str) -> CollectionReference:
        """A collection by path."""
        return CollectionReference(self._db.collection(collection_path))

    def document(self, document_path: str) -> DocumentReference:
        """A document by path."""
        return DocumentReference(self._db.document(document_path))
