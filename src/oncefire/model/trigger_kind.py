"""TriggerKind: what starts a function. The one list of kinds; the catalogue stores the value.

Adding a kind: a member here, the decorator that makes its triggers, and a line for it in
each table of tests/unit/test_trigger_kind.py (which fails until every place that dispatches
on kinds says what the new kind does there).
"""

from __future__ import annotations

from enum import StrEnum


class TriggerKind(StrEnum):
    """What starts a function: a document write, a row change, a topic message, a schedule
    tick, an HTTP request or a Realtime Database value (oncefire.firebase.db)."""

    DOCUMENT = "document"
    ROW = "row"
    MESSAGE = "message"
    SCHEDULE = "schedule"
    HTTP = "http"
    DATABASE = "database"

    @property
    def is_run_by_workers(self) -> bool:
        """Whether workers run its deliveries: HTTP functions run in the HTTP server."""
        return self is not TriggerKind.HTTP
