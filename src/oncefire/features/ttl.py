"""TTL policies: documents whose expiry field has passed are deleted by the workers.

A policy's field is a declared index of its collection (declared with the policy, which
indexes the documents already there), and its keys sort by time (index_keys), so a sweep
finds the due documents by a walk of that index up to now, in batches: with nothing due it
is one index probe, whatever the collection holds. Each document is read again in its
delete transaction, so one renewed meanwhile is kept.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from oncefire.model.index_keys import expired_ranges
from oncefire.model.paths import collection_path
from oncefire.transforms import field_names

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime

BATCH = 500


def expiry_of(value: Any) -> float | None:
    """The expiry time a field value names (an aware datetime or epoch seconds), or None."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def add_policy(rt: Runtime, collection: str, field: str) -> None:
    """Record a policy, and index its field now if the store is open (else the Runtime does
    when it opens the store)."""
    path = collection_path(collection)
    field_names(field, "TTL field")
    rt.ttl_policies[path] = field
    if rt.is_open:  # the store is opened on first use, not at ttl()
        rt.db.collection(path).index(field)


def sweep(rt: Runtime, limit: int = BATCH) -> int:
    """Delete up to `limit` expired documents per policy, and expired tx.claim keys; how many."""
    now = rt.clock.now()
    removed = rt.store.purge_expired_claims(now, limit)
    for collection, field in rt.ttl_policies.items():
        for path in rt.store.expired_paths(collection, field, expired_ranges(now), limit):
            with rt.db.transaction() as tx:
                ref = rt.db.document(path)
                snap = tx.get(ref)
                at = expiry_of(snap.get(field)) if snap.exists else None
                if at is not None and at <= now:  # it may have been renewed meanwhile
                    tx.delete(ref)
                    removed += 1
    return removed
