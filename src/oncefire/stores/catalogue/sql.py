"""The function catalogue contract over named queries, the same on both databases: register,
touch, pause, resume and forget functions, and route events no function took when they were
written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from oncefire.events import StoredEvent
from oncefire.stores.catalogue.tables import bytes_as_base64
from oncefire.stores.catalogue.types import FunctionEntry, FunctionRow
from oncefire.stores.connection import Statements
from oncefire.stores.documents.contract import DocumentTx
from oncefire.stores.reads.dead_rows import error_group_of


class SqlCatalogue:
    """Mixed into SqlStore: runs the named queries of `sql/<dialect>/functions.sql`."""

    def _one(self) -> Statements:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def _decode(self, value: Any) -> Any:
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[DocumentTx]:
        raise NotImplementedError

    def register_functions(self, records: Sequence[FunctionEntry]) -> None:
        """Record functions (a name registered again takes its new trigger)."""
        rows = [
            {
                "name": r.name,
                "kind": r.kind,
                "source": r.source,
                "event_types": ",".join(r.event_types),
                "registered_at": r.registered_at,
                "fields": json.dumps(list(r.fields)) if r.fields else None,
                "attributes": json.dumps(dict(r.attributes)) if r.attributes else None,
            }
            for r in records
        ]
        with self._write() as st:
            st.execute_many("upsert_function", rows)
            for r in records:
                if r.ordering:
                    st.execute("order_function", {"function": r.name, "keyed_by": r.ordering})
                else:
                    st.execute("unorder_function", {"function": r.name})
                if r.ordering != "key":  # deliveries left waiting for a key take one
                    st.execute("unkey_function", {"function": r.name, "keyed_by": r.ordering})
            st.execute("bump_catalog")

    # -- routing -------------------------------------------------------------------------

    def move_row_changes(self, limit: int) -> int:
        """Move at most `limit` row changes captured by table triggers into the outbox, as
        events marked 'new', in one transaction; how many."""
        with self._write() as st:
            for seq, data in st.fetch("row_changes_with_bytes", {"limit": limit}):
                fixed = json.dumps(bytes_as_base64(json.loads(data)), ensure_ascii=False)
                st.execute("set_row_change_data", {"seq": seq, "data": fixed})
            moved = st.count("move_row_changes", {"limit": limit})
            st.execute("count_moved_row_changes", {"limit": limit})
            st.execute("forget_row_changes", {"limit": limit})
        return moved

    def events_to_route(self, routing: str, after: str, limit: int) -> list[StoredEvent]:
        """Events marked `routing` ('new' or 'unrouted') with an id above `after`, by id."""
        rows = self._one().fetch(
            "events_to_route", {"routing": routing, "after": after, "limit": limit}
        )
        return [
            StoredEvent(event_id, type_, source, at, self._decode(data), size)
            for event_id, type_, source, at, data, size in rows
        ]

    def route_events(
        self, routes: Sequence[tuple[str, Sequence[str]]], from_state: str, now: float
    ) -> int:
        """Give each (event id, functions) its deliveries and clear its mark, or mark it
        'unrouted' when no function takes it; only events still marked from_state change.
        How many events got deliveries."""
        routed = 0
        with self.transaction() as tx:
            for event_id, names in routes:
                if tx.mark_routed(event_id, from_state, None if names else "unrouted") and names:
                    tx.add_deliveries(event_id, names, now)
                    routed += 1
        return routed

    def functions_to_route(self) -> list[str]:
        """Names new to the store whose unrouted events are still to be offered to them."""
        return [r[0] for r in self._one().fetch("functions_to_route")]

    def routing_done(self, name: str) -> None:
        """The unrouted events were offered to a new function."""
        self._one().execute("routing_done", {"name": name})

    # The read side (the read model takes it over).
    def count_unrouted(self) -> int:
        """How many events no function has taken yet."""
        return int(self._one().fetch("count_unrouted")[0][0])

    # -- the catalogue -------------------------------------------------------------------

    def touch_functions(self, names: Sequence[str], now: float) -> None:
        """A worker serving these functions is alive at now."""
        if names:
            self._one().execute("touch_functions", {"names": list(names), "now": now})

    def function_rows(self) -> list[FunctionRow]:
        """Every stored function with its pending count, by name."""
        functions = []
        for row in self._one().fetch("function_rows"):
            name, kind, source, types, registered_at, seen, paused_at, reason, pending = row
            head = (name, kind, source, tuple(types.split(",")), registered_at)
            functions.append(FunctionRow(*head, seen, paused_at, reason, int(pending)))
        return functions

    def pause_function(self, name: str, now: float, reason: str) -> bool:
        """Pause a function; False if it is unknown or already paused."""
        args = {"name": name, "now": now, "reason": reason}
        return bool(self._one().fetch("pause_function", args))

    def resume_function(self, name: str) -> bool:
        """Resume a paused function; False if it is unknown or not paused."""
        return bool(self._one().fetch("resume_function", {"name": name}))

    def paused_functions(self) -> set[str]:
        """The names of the paused functions."""
        return {r[0] for r in self._one().fetch("paused_functions")}

    def forget_function(self, name: str, now: float, error: str) -> int | None:
        """Stop routing events to a function and make its pending deliveries dead letters
        (with error), in one transaction; how many, or None if the name is not stored."""
        with self._write() as st:
            if not st.fetch("forget_function", {"name": name}):
                return None
            st.execute("bump_catalog")
            args = {"name": name, "now": now, "error": error, "error_group": error_group_of(error)}
            return self._bury_pending_of(st, args)

    def _bury_pending_of(self, st: Statements, args: dict[str, Any]) -> int:
        """Make a forgotten function's pending deliveries dead letters; how many."""
        return len(st.fetch("bury_pending_of", args))

    # -- the read side (the read model takes these over) --------------------------------

    def budget_used(self, function: str, since: float) -> tuple[int, int]:
        """(attempts of a function ended since a time, its deliveries running now)."""
        ((ended, running),) = self._one().fetch(
            "budget_used", {"function": function, "since": since}
        )
        return int(ended), int(running)

    def failures_after(self, function: str, after: float) -> tuple[int, int]:
        """(attempts of a function ended after a time, how many of them did not succeed)."""
        ((ended, failed),) = self._one().fetch(
            "failures_after", {"function": function, "after": after}
        )
        return int(ended), int(failed or 0)
