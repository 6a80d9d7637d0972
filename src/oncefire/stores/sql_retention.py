"""Retention on both databases: history deleted in small batches found by index.

Each batch is one short write transaction (`Settings.purge_batch` rows, 100 by default) that
ends by giving up to RECLAIM_PAGES free pages back to the file system (SQLite with
auto_vacuum = INCREMENTAL); the live path's statements run between batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager

from oncefire.stores.connection import Row, Statements

RECLAIM_PAGES = 64  # pages (4 KiB each) given back a batch, in its short write transaction
CHUNK = 1000  # ids a statement takes (SQLite's parameter limit is 32,766)

# What each kind of purge counts, by the query that counts it for a dry run.
COUNTS = {
    "finished": {
        "deliveries": "count_finished_before",
        "attempts": "count_attempts_finished_before",
        "events": "count_events_finished_before",
    },
    "claims": {"claims": "count_expired_claims"},
    "dedupe_hits": {"dedupe_hits": "count_dedupe_hits_before"},
    "buckets": {"buckets": "count_buckets_before"},
    "unrouted": {"unrouted": "count_unrouted_before"},
}


class SqlRetention:
    """The store operations of retention (`oncefire.features.retention` decides what and when)."""

    def _one(self) -> Statements:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def purge(self, kind: str, before: float, limit: int) -> dict[str, int]:
        """Delete up to `limit` rows of one kind of history older than `before`, in one write
        transaction that also gives some free pages back; how many rows, by table."""
        args = {"before": before, "limit": limit}
        with self._write() as st:
            if kind == "finished":
                counts = self._purge_finished(st, args)
            elif kind == "claims":
                now = {"now": before, "limit": limit}
                counts = {"claims": st.count("purge_claims", now) + st.count("purge_records", now)}
            elif kind == "unrouted":
                counts = {"unrouted": len(st.fetch("purge_unrouted", args))}
            elif kind == "pages":
                return {"pages": self._reclaim(st, limit)}
            elif kind in ("dedupe_hits", "buckets"):
                counts = {kind: st.count(f"purge_{kind}", args)}
            else:
                raise ValueError(f"no purge of {kind!r}")
            self._reclaim(st, RECLAIM_PAGES)
        return counts

    @staticmethod
    def _purge_finished(st: Statements, args: Mapping[str, float]) -> dict[str, int]:
        rows = st.fetch("finished_before", args)
        if not rows:
            return {"deliveries": 0, "attempts": 0, "events": 0}
        ids = [int(r[0]) for r in rows]
        event_ids = sorted({str(r[1]) for r in rows})
        return {
            "attempts": st.count("delete_attempts_of", {"ids": ids, "event_ids": event_ids}),
            "deliveries": st.count("delete_finished", {"ids": ids}),
            "events": st.count("delete_bare_events", {"event_ids": event_ids}),
        }

    @staticmethod
    def _forget_dismissed(st: Statements, rows: Sequence[Row]) -> None:
        """A dismissed dead letter's attempts go with it, and its event once no delivery
        refers to it (in the transaction that dismisses it)."""
        for start in range(0, len(rows), CHUNK):
            part = rows[start : start + CHUNK]
            ids = [int(r[0]) for r in part]
            event_ids = sorted({str(r[1]) for r in part})
            st.execute("delete_attempts_of", {"ids": ids, "event_ids": event_ids})
            st.execute("delete_bare_events", {"event_ids": event_ids})

    @staticmethod
    def _reclaim(st: Statements, pages: int) -> int:
        free = min(int(st.fetch("free_pages")[0][0] or 0), pages)
        for _ in range(free):
            st.execute("reclaim_page")  # one page a step (see reclaim_page)
        return free

    def count_purgeable(self, cutoffs: Mapping[str, float]) -> dict[str, int]:
        """What purging each kind before its cutoff would delete, by table; deletes nothing."""
        counts: dict[str, int] = {}
        with self._snapshot() as st:
            for kind, before in cutoffs.items():
                for name, query in COUNTS[kind].items():
                    args = {"now": before} if kind == "claims" else {"before": before}
                    counts[name] = int(st.fetch(query, args)[0][0] or 0)
        return counts
