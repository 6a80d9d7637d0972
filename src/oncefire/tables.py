"""Functions on the application's own tables: which changes of which table start which
function, and which triggers each watched table needs (docs/tables.md).

A trigger in the application's database inserts one event per changed row, marked 'new', in
the application's transaction; the workers route it (engine/routing.py) to the functions whose
trigger matches it then. A function's stored source is the table, followed by the columns it
filters updates on: `orders` or `orders[status,amount]`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from oncefire.errors import ConfigError
from oncefire.events import EventType
from oncefire.model.trigger_kind import TriggerKind
from oncefire.stores.base import FunctionEntry, Store
from oncefire.stores.catalogue.tables import KINDS, Watch, shape_of

log = logging.getLogger(__name__)

# The event types each change a row trigger takes ("on_row_<change>").
ROW_CHANGES: dict[str, tuple[str, ...]] = {
    "inserted": (EventType.ROW_INSERTED,),
    "updated": (EventType.ROW_UPDATED,),
    "deleted": (EventType.ROW_DELETED,),
    "written": (EventType.ROW_INSERTED, EventType.ROW_UPDATED, EventType.ROW_DELETED),
}
_CHANGE_OF = {EventType.ROW_INSERTED: "inserted", EventType.ROW_UPDATED: "updated"}
_CHANGE_OF[EventType.ROW_DELETED] = "deleted"
_NOT_IN_NAMES = set("/[],") | {chr(i) for i in range(32)}


def check_name(name: Any, what: str) -> str:
    """A table or column name fit for a trigger (any name is quoted in SQL; these few
    characters are refused because event sources and stored filters use them)."""
    if not isinstance(name, str) or not name or len(name) > 128:
        raise ConfigError(f"The {what} name {name!r} must be a non-empty string of at most 128.")
    if _NOT_IN_NAMES & set(name) or name.count(".") > (1 if what == "table" else 0):
        raise ConfigError(
            f"The {what} name {name!r} holds a character oncefire cannot watch ('/', '[', ']', "
            "',', a control character, or a '.' other than the one of 'schema.table')."
        )
    return name


def row_source(table: str, columns: Sequence[str] | None) -> str:
    """The stored source of a row trigger: the table, and its update filter if any."""
    check_name(table, "table")
    if columns is None:
        return table
    if isinstance(columns, str) or not columns:
        raise ConfigError(
            f"columns={columns!r} must be a non-empty list of column names, like ['status']."
        )
    names = sorted({check_name(c, "column") for c in columns})
    return f"{table}[{','.join(names)}]"


def parse_source(source: str) -> tuple[str, tuple[str, ...] | None]:
    """(table, update filter columns or None) of a stored row-trigger source."""
    table, bracket, rest = source.partition("[")
    return table, (tuple(rest.rstrip("]").split(",")) if bracket else None)


def row_matches(source: str, event_type: str, event_source: str, data: Any = None) -> bool:
    """Whether an event of a table starts the function of this stored source: same table,
    and for an update with a column filter, one of those columns changed (when the data is
    known: without it, the trigger's own filter already held)."""
    table, columns = parse_source(source)
    if event_source.partition("/")[0] != table:
        return False
    if columns is None or event_type != EventType.ROW_UPDATED or not isinstance(data, dict):
        return True
    before, after = data.get("before") or {}, data.get("after") or {}
    return any(before.get(c) != after.get(c) for c in columns)


def watches(functions: Sequence[FunctionEntry]) -> list[Watch]:
    """What each table named by a row function must capture: every kind of change some
    function takes; for updates, any column if one function takes them unfiltered, else the
    union of the filtered columns."""
    changes: dict[str, set[str]] = {}
    columns: dict[str, set[str] | None] = {}
    for record in functions:
        if record.kind != TriggerKind.ROW:
            continue
        table, filtered = parse_source(record.source)
        taken = {_CHANGE_OF[EventType(t)] for t in record.event_types if t in _CHANGE_OF}
        changes.setdefault(table, set()).update(taken)
        if "updated" in taken:
            now = columns.get(table, set())
            columns[table] = None if filtered is None or now is None else now | set(filtered)
    return [
        Watch(
            table,
            tuple(k for k in KINDS if k in changes[table]),
            None if columns.get(table) is None else tuple(sorted(columns[table] or ())),
        )
        for table in sorted(changes)
    ]


def stored_functions(store: Store) -> list[FunctionEntry]:
    """Every function the store's catalogue holds (of every app sharing it)."""
    with store.read() as tx:
        return tx.functions()


def watch_tables(store: Store, now: float, own: Sequence[str] = ()) -> list[str]:
    """Install or update the triggers of every table a stored row function names; one line
    per table whose triggers were (re)made or skipped. Idempotent: a table whose triggers
    already capture what is needed, from the same columns, is left alone. A table that
    cannot be watched (missing, no primary key) raises a ConfigError when `own` (the tables
    of the caller's functions) names it, and is skipped with a line otherwise: another app's
    stale function must not stop this one."""
    done = {w.name: w for w in store.tables.watched()}
    lines = []
    for watch in watches(stored_functions(store)):
        before = done.get(watch.table)
        shape = shape_of(store.tables.columns(watch.table))
        if (
            before is not None
            and before.kinds == watch.kinds
            and before.columns == watch.columns
            and before.shape == shape
        ):
            continue
        try:
            store.tables.install(watch, now)
        except ConfigError as exc:
            if watch.table in own:
                raise
            lines.append(f"skipped table {watch.table}: {exc}")
            continue
        what = "watching" if before is None else "triggers made again for"
        captured = ", ".join(watch.kinds)
        filtered = "" if watch.columns is None else f" (updates of {', '.join(watch.columns)})"
        lines.append(f"{what} table {watch.table}: {captured}{filtered}")
    return lines


def unwatch_table(store: Store, table: str) -> bool:
    """Drop a table's triggers; whether it was watched."""
    return store.tables.remove(check_name(table, "table"))


def changed_tables(store: Store) -> list[tuple[str, str]]:
    """(table, sentence) per table named by a row function but not watched, and per watched table
    whose columns changed since its triggers were made (on SQLite the triggers then miss new
    columns; PostgreSQL reads whole rows) or that was dropped."""
    found: list[tuple[str, str]] = []
    watched_tables = store.tables.watched()
    names = {w.name for w in watched_tables}
    for watch in watches(stored_functions(store)):
        if watch.table not in names:
            found.append(
                (
                    watch.table,
                    f"the table {watch.table} has row functions but no triggers yet, so its "
                    "changes are not captured: run `oncefire migrate` (or app.watch_tables())",
                )
            )
    for watched in watched_tables:
        shape = shape_of(store.tables.columns(watched.name))
        if shape == watched.shape:
            continue
        if not shape:
            found.append(
                (
                    watched.name,
                    f"the watched table {watched.name} no longer exists: `oncefire unwatch "
                    f"{watched.name}` forgets it",
                )
            )
        elif store.dialect == "sqlite":
            found.append(
                (
                    watched.name,
                    f"the table {watched.name} changed since its triggers were made (now: "
                    f"{shape}): run `oncefire migrate` to make them again, or its events miss "
                    "the change",
                )
            )
    return found


def warn_changed_tables(store: Store) -> None:
    """Log one WARNING line per changed or unwatched table (a worker's start)."""
    try:
        found = changed_tables(store)
    except Exception as exc:  # a worker starts even if its catalogue cannot be read
        log.error("cannot check the watched tables: %s", exc)
        return
    for _table, sentence in found:
        log.warning(sentence)
