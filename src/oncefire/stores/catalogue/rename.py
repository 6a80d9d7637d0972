"""The store side of renaming a function (catalogue.Functions.rename decides when): what is
kept under its name moves to the new name in one transaction, by the named queries of
sql/<dialect>/rename.sql.

What moves: the catalogue row (trigger, pause, last seen; if the new name has none), every
delivery (pending, running, dead letters and finished history), attempts, hour buckets,
dead-letter counts, dedupe hits, the metric totals, @idempotent records (their key starts
with the name), ordering, the rate-limit bucket and the awaited sources it took. Audit
entries keep the name they were written with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from oncefire.stores.base import Store
from oncefire.stores.connection import Statements
from oncefire.stores.documents.sql_tx import statements_of

MOVES = (
    "rename_deliveries",
    "rename_attempts",
    "rename_dedupe_hits",
    "rename_totals",  # before the buckets: see sql/sqlite/rename.sql
    "drop_renamed_totals",
    "rename_buckets",
    "drop_renamed_buckets",
    "rename_dead_counts",
    "drop_renamed_dead_counts",
    "rename_records",
    "rename_awaited",
)


@dataclass(frozen=True, slots=True)
class Known:
    """What the store holds of a function name."""

    is_stored: bool  # in the catalogue
    has_deliveries: bool  # any delivery, in any state


@dataclass(frozen=True, slots=True)
class Renamed:
    """What a rename moved: the deliveries still to run and the dead letters."""

    pending: int
    dead: int


def _known(st: Statements, name: str) -> Known:
    ((is_stored, has_deliveries),) = st.fetch("function_known", {"name": name})
    return Known(bool(is_stored), bool(has_deliveries))


def rename(store: Store, old: str, new: str, check: Callable[[Known, Known], None]) -> Renamed:
    """Move everything kept under `old` to `new`, in one transaction, once check(what the
    store holds of old, of new) has not raised; what moved."""
    args = {"old": old, "new": new}
    with store.transaction() as tx:
        st = statements_of(tx)
        check(_known(st, old), _known(st, new))
        # Rows (of a query or a RETURNING statement) are read at once: in a pipelined
        # PostgreSQL transaction they are there only once fetched.
        waiting: dict[str, int] = dict(st.fetch("waiting_of", args))
        if st.fetch("rename_catalogue_row", args):  # the new name had no row
            st.execute("rename_ordering", args)
            st.execute("rename_rate_bucket", args)
        for name in ("drop_renamed_row", "drop_renamed_ordering", "drop_renamed_rate_bucket"):
            st.execute(name, args)
        for name in MOVES:
            st.execute(name, args)
        st.execute("bump_catalog")
    pending = int(waiting.get("pending", 0)) + int(waiting.get("running", 0))
    return Renamed(pending, int(waiting.get("dead", 0)))
