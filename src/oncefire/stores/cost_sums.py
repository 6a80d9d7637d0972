"""The hour-bucket sums `oncefire cost` reads: one row per function and outcome.

The SQL lives in sql/<dialect>/cost.sql (`-- name: cost_sums`); the read runs in the store's
read-only snapshot and costs a few rows an hour a function, whatever the history.
"""

from __future__ import annotations

from dataclasses import dataclass

from oncefire.model.buckets import hour_of
from oncefire.stores import queries
from oncefire.stores.base import Store


@dataclass(frozen=True, slots=True)
class OutcomeSums:
    """A function's attempts of one outcome over a window, and what they spent."""

    function: str
    outcome: str
    attempts: int
    seconds: float
    cpu_seconds: float
    reads: int
    writes: int


def cost_sums(store: Store, since: float) -> list[OutcomeSums]:
    """Sums per function and outcome from the hour that holds `since` on."""
    query = queries.load(store.dialect)["cost_sums"]
    with store.read() as tx:
        conn = tx.conn  # type: ignore[attr-defined]
        rows = conn.execute(query, {"since_hour": hour_of(since)}).fetchall()
    return [
        OutcomeSums(str(f), str(o), int(n), float(s), float(c), int(r), int(w))
        for f, o, n, s, c, r, w in rows
    ]
