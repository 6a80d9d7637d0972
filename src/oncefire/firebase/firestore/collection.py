"""Collections as `google.cloud.firestore` hands them out: CollectionReference (a query over
one collection, and what adds and lists its documents) and CollectionGroup."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from oncefire.firebase.firestore.document import DocumentReference, Refs, auto_id
from oncefire.firebase.firestore.query import Query, Shape
from oncefire.model import paths

PAGE = 500  # document paths listed a read


class CollectionReference(Query):
    """A collection, as `google.cloud.firestore.CollectionReference`."""

    def __init__(self, client: Refs, path: str) -> None:
        super().__init__(client, Shape(paths.collection_path(path)))
        self.path = paths.collection_path(path)

    @property
    def id(self) -> str:
        """The collection's id (the last segment of its path)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def parent(self) -> DocumentReference | None:
        """The document holding this sub-collection; None for a top-level collection."""
        if "/" not in self.path:
            return None
        return self._client.document(self.path.rsplit("/", 1)[0])

    def document(self, document_id: str | None = None) -> DocumentReference:
        """A reference to a document of the collection (a new 20-character id if none)."""
        return self._client.document(self.path, auto_id() if document_id is None else document_id)

    def add(
        self, document_data: dict[str, Any], document_id: str | None = None, **_: Any
    ) -> tuple[datetime | None, DocumentReference]:
        """Create a document (a new id if none); return (its update time, its reference)."""
        reference = self.document(document_id)
        result = reference.create(document_data)
        return result.update_time, reference

    def list_documents(self, page_size: int | None = None, **_: Any) -> Iterator[DocumentReference]:
        """References to the collection's documents, and to the missing documents that hold
        sub-collections, in id order (as the client lists them)."""
        db = self._client.database
        ids: set[str] = set()
        after = ""
        while True:
            with db.reading() as tx:
                page = tx.documents_page(self.path, after, PAGE)
            ids.update(path.rsplit("/", 1)[-1] for path, _ in page)
            if len(page) < PAGE:
                break
            after = page[-1][0]
        prefix = self.path + "/"
        with db.reading() as tx:
            names = tx.collection_names(prefix)
        ids.update(name[len(prefix) :].split("/", 1)[0] for name in names)
        for document_id in sorted(ids):
            yield self.document(document_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CollectionReference) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"CollectionReference({self.path!r})"


class CollectionGroup(Query):
    """Every collection of one id, wherever it lies, as `google.cloud.firestore.CollectionGroup`."""

    def __init__(self, client: Refs, collection_id: str) -> None:
        super().__init__(client, Shape(None, paths.check_id(collection_id, "collection id")))
