"""WriteBatch, Transaction and `@transactional`: writes that commit together, as
`google.cloud.firestore` makes them.

A batch or a transaction keeps its writes (at most 500) and makes them, with their events, in
one oncefire transaction: all or none. A transactional function reads before it writes, and
its reads lock what they read until the commit; on contention (a deadlock, a busy store) it
runs again, up to max_attempts (5), as the client retries an aborted transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from oncefire.clock import to_datetime
from oncefire.documents import Transaction as NativeTransaction
from oncefire.errors import (
    InvalidDocumentError,
    OncefireError,
    StoreConflictError,
    StoreUnavailableError,
    TransactionAbortedError,
)
from oncefire.firebase.firestore.document import (
    DocumentReference,
    DocumentSnapshot,
    Refs,
    WriteResult,
    project,
)

MAX_WRITES = 500
MAX_ATTEMPTS = 5
T = TypeVar("T")
Write = tuple[str, DocumentReference, Any, bool]  # (op, reference, data, merge)


class ReadAfterWriteError(OncefireError):
    """A transaction read after it wrote: Firestore reads every document first."""


class WriteBatch:
    """Writes committed together, as `google.cloud.firestore.WriteBatch`."""

    def __init__(self, client: Refs) -> None:
        self._client = client
        self._writes: list[Write] = []
        self.write_results: list[WriteResult] | None = None
        self.commit_time: Any = None

    def create(self, reference: DocumentReference, document_data: dict[str, Any]) -> None:
        """Create a document at commit (the commit fails if it exists)."""
        self._add(("create", reference, document_data, False))

    def set(
        self, reference: DocumentReference, document_data: dict[str, Any], merge: bool = False
    ) -> None:
        """Create or replace (or merge into) a document at commit."""
        self._add(("set", reference, document_data, merge))

    def update(
        self, reference: DocumentReference, field_updates: dict[str, Any], option: Any = None
    ) -> None:
        """Change fields of a document at commit (the commit fails if it is missing)."""
        self._add(("update", reference, field_updates, False))

    def delete(self, reference: DocumentReference, option: Any = None) -> None:
        """Delete a document at commit."""
        self._add(("delete", reference, None, False))

    def commit(self, **_: Any) -> list[WriteResult]:
        """Make every write in one transaction; the result of each, in order."""
        with self._client.database.transaction() as tx:
            results = self._apply(tx)
        self._writes = []
        return results

    def __len__(self) -> int:
        return len(self._writes)

    def __enter__(self) -> WriteBatch:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.commit()

    def _add(self, write: Write) -> None:
        if not isinstance(write[1], DocumentReference):
            raise InvalidDocumentError(
                f"A batch writes DocumentReferences; got {write[1]!r}: use client.document()."
            )
        if len(self._writes) >= MAX_WRITES:
            raise InvalidDocumentError(
                f"A batch or transaction holds at most {MAX_WRITES} writes: commit this one "
                "and start another."
            )
        self._writes.append(write)

    def _apply(self, tx: NativeTransaction) -> list[WriteResult]:
        db = self._client.database
        for op, reference, data, merge in self._writes:
            native = db.document(reference.path)
            if op == "create":
                tx.create(native, data)
            elif op == "set":
                tx.set(native, data, merge=merge)
            elif op == "update":
                tx.update(native, data)
            else:
                tx.delete(native)
        self.commit_time = to_datetime(db.clock.now())
        self.write_results = [WriteResult(self.commit_time) for _ in self._writes]
        return self.write_results


class Transaction(WriteBatch):
    """A read-write transaction, as `google.cloud.firestore.Transaction`: run a function
    in it with @transactional."""

    def __init__(self, client: Refs, max_attempts: int = MAX_ATTEMPTS, read_only: bool = False):
        super().__init__(client)
        self._max_attempts = max_attempts
        self._read_only = read_only
        self._native: NativeTransaction | None = None

    @property
    def in_progress(self) -> bool:
        """Whether a transactional function is running in it."""
        return self._native is not None

    def get(self, ref_or_query: Any, **_: Any) -> Iterator[DocumentSnapshot]:
        """The snapshot of a reference (as a one-item generator), or a query's results."""
        if isinstance(ref_or_query, DocumentReference):
            return iter([self.read(ref_or_query, None)])
        if hasattr(ref_or_query, "stream"):
            return iter(ref_or_query.get(transaction=self))
        raise InvalidDocumentError(
            'Value for argument "ref_or_query" must be a DocumentReference or a Query.'
        )

    def get_all(self, references: Iterable[DocumentReference], **_: Any) -> Iterator[Any]:
        """The snapshots of these references."""
        return iter([self.read(reference, None) for reference in references])

    def read(
        self, reference: DocumentReference, field_paths: Iterable[str] | None
    ) -> DocumentSnapshot:
        """A document read inside the transaction (what ref.get(transaction=...) calls)."""
        self.before_read()
        native = self._native or self._client.database.active_transaction()
        if native is None:
            return reference.get(field_paths)
        found = DocumentSnapshot.of(
            reference, native.get(self._client.database.document(reference.path))
        )
        return found if field_paths is None else project(found, field_paths)

    def before_read(self) -> None:
        """Refuse a read once the transaction holds writes, as the client does."""
        if self._writes:
            raise ReadAfterWriteError(
                "Attempted read after write in a transaction: read every document first."
            )

    def _add(self, write: Write) -> None:
        if self._read_only:
            raise InvalidDocumentError("Cannot perform write operation in read-only transaction.")
        super()._add(write)

    def run(self, body: Callable[[], T]) -> T:
        """Run body in one oncefire transaction, its writes made at the end; again on
        contention, up to max_attempts times."""
        last: Exception | None = None
        for _ in range(self._max_attempts):
            self._writes = []
            try:
                with self._client.database.transaction() as tx:
                    self._native = tx
                    try:
                        result = body()
                        self._apply(tx)
                    finally:
                        self._native = None
                return result
            except (StoreConflictError, StoreUnavailableError) as exc:
                last = exc  # contention: the whole function runs again
            finally:
                self._writes = []
        raise TransactionAbortedError(
            f"Failed to commit transaction in {self._max_attempts:d} attempts."
        ) from last


def transactional(to_wrap: Callable[..., T]) -> Callable[..., T]:
    """Run the decorated function(transaction, ...) in that transaction, retried on
    contention, as `google.cloud.firestore.transactional`."""

    @functools.wraps(to_wrap)
    def run(transaction: Transaction, *args: Any, **kwargs: Any) -> T:
        if not isinstance(transaction, Transaction):
            raise InvalidDocumentError(
                "A @transactional function takes client.transaction() as its first argument."
            )
        return transaction.run(lambda: to_wrap(transaction, *args, **kwargs))

    return run
