"""The function catalogue: the functions a store knows (register, touch, pause, resume,
forget), the triggers on the application's own tables, and the routing of events that no
function took yet to the functions registered later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from oncefire.events import StoredEvent
from oncefire.stores.catalogue.tables import TableTriggers
from oncefire.stores.catalogue.types import FunctionEntry, FunctionRow


class Catalogue(Protocol):
    """The functions a store knows and the routing of events to them."""

    tables: TableTriggers
    """The triggers on the application's own tables (oncefire.tables decides what they hold)."""

    def register_functions(self, records: Sequence[FunctionEntry]) -> None: ...

    def touch_functions(self, names: Sequence[str], now: float) -> None:
        """A worker serving these functions is alive at now."""

    def function_rows(self) -> list[FunctionRow]:
        """Every stored function with its pending count, by name."""

    def pause_function(self, name: str, now: float, reason: str) -> bool:
        """Pause a function; False if it is unknown or already paused."""

    def resume_function(self, name: str) -> bool:
        """Resume a paused function; False if it is unknown or not paused."""

    def paused_functions(self) -> set[str]:
        """The names of the paused functions."""

    def forget_function(self, name: str, now: float, error: str) -> int | None:
        """Stop routing to a function and make its pending deliveries dead letters; how
        many, or None if the name is not stored."""

    def move_row_changes(self, limit: int) -> int:
        """Move at most `limit` row changes captured by table triggers into the outbox, as
        events marked 'new', in one transaction; how many."""

    def events_to_route(self, routing: str, after: str, limit: int) -> list[StoredEvent]:
        """Events marked `routing` ('new' or 'unrouted') with an id above `after`, by id."""

    def route_events(
        self, routes: Sequence[tuple[str, Sequence[str]]], from_state: str, now: float
    ) -> int:
        """Give each (event id, functions) its deliveries and clear its mark (or mark it
        'unrouted' when no function takes it); how many events got deliveries."""

    def functions_to_route(self) -> list[str]:
        """Names new to the store whose unrouted events are still to be offered to them."""

    def routing_done(self, name: str) -> None:
        """The unrouted events were offered to a new function."""
