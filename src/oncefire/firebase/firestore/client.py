"""The database handle, as `google.cloud.firestore.Client` and `firebase_admin.firestore.client()`.

A client reads and writes the documents of the App running the code (the default App outside
one), found at each call, so a module-level `db = firestore.client()` follows whichever App
runs the function. Its arguments (project, credentials, database) name Google resources and
are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from oncefire import documents
from oncefire.errors import InvalidPathError
from oncefire.firebase.firestore.collection import CollectionGroup, CollectionReference
from oncefire.firebase.firestore.document import DocumentReference, DocumentSnapshot
from oncefire.firebase.firestore.writes import MAX_ATTEMPTS, Transaction, WriteBatch
from oncefire.firebase.registration.apps import current_app


class Client:
    """The document database, as `google.cloud.firestore.Client`."""

    def __init__(
        self, project: Any = None, credentials: Any = None, database: Any = None, **_: Any
    ):
        self._database = database if isinstance(database, documents.Database) else None
        self.project = project

    @property
    def database(self) -> documents.Database:
        """The App's document database (the App running this code, else the default App)."""
        return self._database or current_app().db

    def collection(self, *collection_path: str) -> CollectionReference:
        """A collection by path: collection("users") or collection("users", "u1", "posts")."""
        return CollectionReference(self, _joined(collection_path))

    def document(self, *document_path: str) -> DocumentReference:
        """A document by path: document("users/u1") or document("users", "u1")."""
        return DocumentReference(self, _joined(document_path))

    def collection_group(self, collection_id: str) -> CollectionGroup:
        """A query over every collection with this id, at any depth."""
        return CollectionGroup(self, collection_id)

    def collections(self, **_: Any) -> Iterator[CollectionReference]:
        """The top-level collections that hold documents."""
        with self.database.reading() as tx:
            names = tx.collection_names("")
        for collection_id in sorted({name.split("/", 1)[0] for name in names}):
            if not collection_id.startswith(RESERVED_PREFIX):
                yield self.collection(collection_id)

    def get_all(
        self,
        references: Iterable[DocumentReference],
        field_paths: Iterable[str] | None = None,
        transaction: Transaction | None = None,
        **_: Any,
    ) -> Iterator[DocumentSnapshot]:
        """The snapshots of these references (once each; missing ones with exists False)."""
        seen: dict[str, DocumentReference] = {}
        for reference in references:
            seen.setdefault(reference.path, reference)
        paths = list(field_paths) if field_paths is not None else None
        for reference in seen.values():
            yield reference.get(paths, transaction=transaction)

    def batch(self) -> WriteBatch:
        """A batch of writes committed together (at most 500)."""
        return WriteBatch(self)

    def transaction(self, max_attempts: int = MAX_ATTEMPTS, read_only: bool = False) -> Transaction:
        """A transaction to run a @transactional function in."""
        return Transaction(self, max_attempts=max_attempts, read_only=read_only)

    @staticmethod
    def field_path(*field_names: str) -> str:
        """A dotted field path from its names."""
        return ".".join(field_names)

    def recursive_delete(self, reference: CollectionReference | DocumentReference, **_: Any) -> int:
        """Delete a document or collection and everything below it; how many documents."""
        base = reference.path
        with self.database.reading() as tx:
            below = tx.collection_names(base + "/")
        names = [base] if isinstance(reference, CollectionReference) else []
        deleted = 0
        if isinstance(reference, DocumentReference) and reference.get().exists:
            reference.delete()
            deleted += 1
        for name in [*names, *below]:
            for document in CollectionReference(self, name).list_documents():
                if document.get().exists:
                    document.delete()
                    deleted += 1
        return deleted


RESERVED_PREFIX = "__"  # collection ids Firestore reserves (__.*__), and oncefire's own


def _joined(segments: tuple[str, ...]) -> str:
    if not segments or not all(isinstance(part, str) for part in segments):
        raise InvalidPathError(f"A path is one or more strings; got {segments!r}.")
    return "/".join(part.strip("/") for part in segments)


def client(app: Any = None, database_id: Any = None) -> Client:
    """The document database of an App (firebase_admin.firestore.client): the given one, else
    the App running this code, else the default App."""
    return Client(database=app.db) if app is not None else Client()
