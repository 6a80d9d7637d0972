"""TTL policies: documents whose expiry field has passed are deleted by the workers."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oncefire.app import App

BATCH = 500


def expiry_of(value: Any) -> float | None:
    """The expiry time a field value names (an aware datetime or epoch seconds), or None."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def sweep(app: App, limit: int = BATCH) -> int:
    """Delete up to `limit` expired documents per policy, and expired claims; how many."""
    now = app.clock.now()
    removed = app.store.purge_expired_claims(now, limit)
    for collection, field in app.ttl_policies.items():
        expired = [
            snap.path
            for snap in app.db.collection(collection).get()
            if (at := expiry_of(snap.get(field))) is not None and at <= now
        ][:limit]
        for path in expired:
            with app.db.transaction() as tx:
                ref = app.db.document(path)
                snap = tx.get(ref)
                at = expiry_of(snap.get(field)) if snap.exists else None
                if at is not None and at <= now:  # it may have been renewed meanwhile
                    tx.delete(ref)
                    removed += 1
    return removed
