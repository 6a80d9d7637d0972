"""The App's triggers on the application's own tables (docs/tables.md), mixed into App."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from oncefire.model.trigger_kind import TriggerKind
from oncefire.tables import ROW_CHANGES, parse_source, row_source, unwatch_table, watch_tables
from oncefire.triggers import Trigger, check_function, function_name, make_options

if TYPE_CHECKING:
    from oncefire.clock import Clock
    from oncefire.stores.base import Store

F = TypeVar("F", bound=Callable[..., Any])


class RowTriggers:
    """on_row_inserted/updated/deleted/written, watch_tables and unwatch_table."""

    clock: Clock

    @property
    def triggers(self) -> dict[str, Trigger]:
        raise NotImplementedError

    @property
    def store(self) -> Store:
        raise NotImplementedError

    def _add(self, trigger: Trigger) -> None:
        raise NotImplementedError

    def migrate(self) -> int:
        raise NotImplementedError

    def _row(
        self, change: str, table: str, columns: Sequence[str] | None, options: dict[str, Any]
    ) -> Callable[[F], F]:
        name = options.pop("name", None)
        source = row_source(table, columns)
        opts = make_options(**options)
        types = tuple(str(t) for t in ROW_CHANGES[change])

        def decorator(fn: F) -> F:
            check_function(fn)
            self._add(Trigger(function_name(name, fn), fn, TriggerKind.ROW, source, types, opts))
            return fn

        return decorator

    def on_row_inserted(self, table: str, **options: Any) -> Callable[[F], F]:
        """Run the function for each row inserted into a table of the store's database
        (event.data.after; event.params: the primary key). See docs/tables.md."""
        return self._row("inserted", table, None, options)

    def on_row_updated(
        self, table: str, *, columns: Sequence[str] | None = None, **options: Any
    ) -> Callable[[F], F]:
        """Run the function for each updated row (event.data.before / after); with columns,
        only when one of them changed."""
        return self._row("updated", table, columns, options)

    def on_row_deleted(self, table: str, **options: Any) -> Callable[[F], F]:
        """Run the function for each row deleted from the table (event.data.before)."""
        return self._row("deleted", table, None, options)

    def on_row_written(
        self, table: str, *, columns: Sequence[str] | None = None, **options: Any
    ) -> Callable[[F], F]:
        """Run the function on each insert, update (of columns, if given) or delete."""
        return self._row("written", table, columns, options)

    def watch_tables(self) -> list[str]:
        """Create or upgrade the store's schema, even beside the database's own tables, and
        install or update the triggers of the tables the store's row functions name
        (idempotent; `oncefire migrate APP` does the same); one line per table changed."""
        self.migrate()
        own = [
            parse_source(t.source)[0] for t in self.triggers.values() if t.kind is TriggerKind.ROW
        ]
        return watch_tables(self.store, self.clock.now(), own)

    def unwatch_table(self, table: str) -> bool:
        """Drop the triggers of a table; whether it was watched."""
        return unwatch_table(self.store, table)
