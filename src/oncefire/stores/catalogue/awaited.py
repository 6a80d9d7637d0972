"""The writes of the unrouted events' warning (operations/unrouted.py decides): the awaited
sources recorded and forgotten, as named statements of sql/<dialect>/unrouted.sql. The
reads (unrouted origins, awaited sources) are on the read model, `store.reads`."""

from __future__ import annotations

from collections.abc import Sequence

from oncefire.stores.base import Store
from oncefire.stores.documents.sql_tx import statements_of
from oncefire.stores.reads import Awaited


def await_sources(store: Store, sources: Sequence[Awaited], now: float) -> None:
    """Record awaited sources (one already recorded keeps its reason)."""
    if not sources:
        return
    rows = [
        {"kind": s.kind, "source": s.source, "reason": s.reason, "name": s.name, "since": now}
        for s in sources
    ]
    with store.transaction() as tx:
        statements_of(tx).execute_many("await_source", rows)


def ignore_sources(store: Store, sources: Sequence[tuple[str, str]]) -> int:
    """Forget these (kind, source) awaited sources; how many were recorded."""
    found = 0
    with store.transaction() as tx:
        st = statements_of(tx)
        for kind, source in sources:
            found += len(st.fetch("ignore_source", {"kind": kind, "source": source}))
    return found
