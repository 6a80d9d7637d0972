"""The Store protocol: the few small contracts a database implements, put together.

A store is the delivery queue (queue/), documents and their transaction (documents/),
idempotency records (records/), the function catalogue (catalogue/), the read side
(read_side.py) and the read model (reads/), plus its lifecycle: migrate, close, reopen, the
clock, retention purges.
The core decides; a store records, with every time taken from the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from oncefire.clock import Clock
from oncefire.stores.catalogue.contract import Catalogue
from oncefire.stores.catalogue.types import Catalog as Catalog
from oncefire.stores.catalogue.types import Fanout as Fanout
from oncefire.stores.catalogue.types import FunctionEntry as FunctionEntry
from oncefire.stores.catalogue.types import FunctionRow as FunctionRow
from oncefire.stores.documents.contract import Documents
from oncefire.stores.documents.contract import DocumentTx as DocumentTx
from oncefire.stores.queue.contract import Queue
from oncefire.stores.queue.types import Completed as Completed
from oncefire.stores.queue.types import Ending as Ending
from oncefire.stores.queue.types import Lease as Lease
from oncefire.stores.queue.types import Leased as Leased
from oncefire.stores.queue.types import Taken as Taken
from oncefire.stores.reads.contract import StoreReads
from oncefire.stores.reads.counts import FunctionCounts as FunctionCounts
from oncefire.stores.reads.dead_rows import DeadLetterFilter as DeadLetterFilter
from oncefire.stores.reads.dead_rows import DeadLetterRow as DeadLetterRow
from oncefire.stores.reads.dead_rows import DeadSearchRows as DeadSearchRows
from oncefire.stores.reads.dead_rows import error_group_of as error_group_of
from oncefire.stores.reads.read_side import ReadSide
from oncefire.stores.records.contract import Records
from oncefire.stores.records.types import IdempotencyCompletion as IdempotencyCompletion
from oncefire.stores.records.types import IdempotencyRecord as IdempotencyRecord


class Store(Queue, Documents, Records, Catalogue, ReadSide, StoreReads, Protocol):
    """A database that records oncefire's state; SQLite and PostgreSQL implement it."""

    url: str
    dialect: str  # "sqlite" or "postgres": which named queries (stores/sql/<dialect>) it runs

    def migrate(self, *, beside_tables: bool = True) -> int:
        """Create or upgrade the schema; its version (beside_tables: see stores/schema.py)."""

    def close(self) -> None: ...

    def reopen_if_moved(self) -> bool:
        """Reopen the store if its file was deleted or replaced under it (SQLite); if so."""

    def batch(self) -> AbstractContextManager[None]:
        """This thread's store calls in the block share one transaction (one commit, or none)."""

    def use_clock(self, clock: Clock) -> None:
        """The app's clock (PostgreSQL judges leases by the database's when it is the system's)."""

    def purge(self, kind: str, before: float, limit: int) -> dict[str, int]:
        """Delete up to `limit` rows of one kind of history (features.retention.KINDS) older
        than `before` in one short write transaction that gives free pages back; how many.
        Kind "pages" gives up to `limit` free pages back (SQLite), and deletes nothing."""

    def count_purgeable(self, cutoffs: Mapping[str, float]) -> dict[str, int]:
        """What purging each kind before its cutoff would delete, by table."""
