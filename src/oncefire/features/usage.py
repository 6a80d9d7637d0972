"""The store reads and writes one attempt's function makes, counted for `oncefire cost`.

An attempt sets a fresh StoreOps in a context variable before it calls the function; the
document API adds to it. What counts (docs/audit.md, "The cost model"): a read is a document
returned by `get` (a missing one counts 1) or by a query (an empty result counts 1); a write
is a `set`, `create`, `update` or `delete` of a document, a `tx.claim` or a `publish`. Work
the function hands to threads of its own is not seen.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class StoreOps:
    """Store reads and writes counted during one attempt."""

    reads: int = 0
    writes: int = 0


CURRENT_OPS: ContextVar[StoreOps | None] = ContextVar("oncefire_store_ops", default=None)


def count_reads(documents: int) -> None:
    """Count a read that returned this many documents (at least one read is counted)."""
    ops = CURRENT_OPS.get()
    if ops is not None:
        ops.reads += max(documents, 1)


def count_write() -> None:
    """Count one write."""
    ops = CURRENT_OPS.get()
    if ops is not None:
        ops.writes += 1
