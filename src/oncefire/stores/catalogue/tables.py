"""Triggers on the application's own tables: install, remove and list them, for both
databases. What each table must capture (a Watch) is decided by the core (oncefire.tables);
this module only turns it into CREATE TRIGGER statements from the templates of
`sql/<dialect>/tables.sql` and runs them, with the watched-tables row, in one transaction."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from oncefire.errors import ConfigError
from oncefire.stores.connection import Statements

KINDS = ("inserted", "updated", "deleted")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_SCALE = re.compile(r"\(\s*\d+\s*(?:,\s*(\d+)\s*)?\)")  # (precision[, scale]) of NUMERIC
BYTES_TAG = "$hex"  # how SQLite's trigger writes a bytes value: {"$hex": "0001FF"}


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a watched table: its name, declared type and place in the primary key."""

    name: str
    type: str
    pk: int  # 1, 2, ... in the primary key; 0 when not in it


@dataclass(frozen=True, slots=True)
class Watch:
    """What the triggers of one table capture: which changes, and for updates, only a change
    of one of `columns` (None: of any column)."""

    table: str
    kinds: tuple[str, ...]
    columns: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class WatchedTable:
    """A table whose triggers are installed, as the store recorded it."""

    name: str
    kinds: tuple[str, ...]
    columns: tuple[str, ...] | None
    shape: str
    watched_at: float


def quote(name: str) -> str:
    """A quoted SQL identifier (a double quote in it doubled): safe for any name."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A quoted SQL string literal (a single quote in it doubled)."""
    return "'" + text.replace("'", "''") + "'"


def fill(template: str, **parts: str) -> str:
    """A template of tables.sql with each {name} replaced; every part is a quoted identifier,
    a quoted literal or a list of them, made by the functions above from catalog names."""

    def part(match: re.Match[str]) -> str:
        return parts[match.group(1)]

    return _PLACEHOLDER.sub(part, template)


def bytes_as_base64(data: Any) -> Any:
    """A row change's data with each bytes value SQLite's trigger tagged as base64."""
    for side in ("before", "after"):
        row = data.get(side) if isinstance(data, dict) else None
        if not isinstance(row, dict):
            continue
        for name, value in row.items():
            if isinstance(value, dict) and list(value) == [BYTES_TAG]:
                row[name] = base64.b64encode(bytes.fromhex(value[BYTES_TAG])).decode("ascii")
    return data


def shape_of(columns: Sequence[Column]) -> str:
    """The text a table's columns are compared by to tell it changed."""
    return ", ".join(f"{c.name} {c.type}" + (f" pk{c.pk}" if c.pk else "") for c in columns)


class TableTriggers:
    """Installs and removes the triggers of watched tables; the dialect classes below say how
    a table is named and how a trigger reads a row."""

    def __init__(
        self,
        write: Callable[[], AbstractContextManager[Any]],
        queries: Mapping[str, str],
    ) -> None:
        self._write = write  # the store's write transaction: named queries, and .conn
        self.queries = queries

    # -- what each dialect supplies ------------------------------------------------------

    def qualified(self, table: str) -> str:
        """The table's name as a quoted (schema-qualified on PostgreSQL) identifier."""
        raise NotImplementedError

    def lookup(self, table: str) -> str:
        """The table's name as the catalogue queries of tables.sql take it."""
        return self.qualified(table)

    def trigger_name(self, table: str, kind: str) -> str:
        """The quoted name of the trigger capturing one kind of change."""
        raise NotImplementedError

    def template_parts(self, table: str, columns: Sequence[Column], watch: Watch) -> dict[str, str]:
        """The parts the trigger templates of this dialect take, for this table."""
        raise NotImplementedError

    # -- operations ----------------------------------------------------------------------

    def _columns(self, st: Statements, table: str) -> list[Column]:
        args = {"table": self.lookup(table)}
        if not int(st.fetch("table_exists", args)[0][0]):
            return []
        return [
            Column(str(r[0]), str(r[1] or ""), int(r[2])) for r in st.fetch("table_columns", args)
        ]

    def columns(self, table: str) -> list[Column]:
        """The table's columns, or [] when there is no such table."""
        with self._write() as st:
            return self._columns(st, table)

    def watched(self) -> list[WatchedTable]:
        """The watched tables, by name."""
        with self._write() as st:
            rows = st.fetch("watched_tables")
        return [
            WatchedTable(
                r[0],
                tuple(k for k in r[1].split(",") if k),
                None if r[2] is None else tuple(r[2].split(",")),
                r[3],
                float(r[4]),
            )
            for r in rows
        ]

    def install(self, watch: Watch, now: float) -> list[Column]:
        """(Re)make the table's triggers for watch and record it, in one transaction; the
        columns they read."""
        with self._write() as st:
            columns = self._columns(st, watch.table)
            _check(watch, columns)
            parts = self.template_parts(watch.table, columns, watch)
            self._drop(st, watch.table)
            for kind in watch.kinds:
                template = self.queries[f"row_{kind}_trigger"]
                st.conn.execute(
                    fill(template, trigger=self.trigger_name(watch.table, kind), **parts)
                )
            args: dict[str, Any] = {
                "name": watch.table,
                "kinds": ",".join(watch.kinds),
                "columns": None if watch.columns is None else ",".join(watch.columns),
                "shape": shape_of(columns),
                "now": now,
            }
            st.execute("save_watched_table", args)
        return columns

    def remove(self, table: str) -> bool:
        """Drop the table's triggers and forget it; whether it was watched."""
        with self._write() as st:
            was_watched = any(r[0] == table for r in st.fetch("watched_tables"))
            if self._columns(st, table):  # a dropped table took its triggers with it
                self._drop(st, table)
            st.execute("forget_watched_table", {"name": table})
        return was_watched

    def _drop(self, st: Any, table: str) -> None:
        for kind in KINDS:
            trigger = self.trigger_name(table, kind)
            st.conn.execute(
                fill(self.queries["drop_row_trigger"], trigger=trigger, table=self.qualified(table))
            )


def _check(watch: Watch, columns: Sequence[Column]) -> None:
    """Refuse a table that is missing, has no primary key, or lacks a filtered column."""
    if not columns:
        raise ConfigError(
            f"There is no table {watch.table!r} in the store's database: create it first (a "
            "watched table lives in the same database as oncefire's tables)."
        )
    if not any(c.pk for c in columns):
        raise ConfigError(
            f"The table {watch.table!r} has no primary key, so its rows cannot be told apart: "
            "add one (event.params and event.source are made from it)."
        )
    missing = sorted(set(watch.columns or ()) - {c.name for c in columns})
    if missing:
        raise ConfigError(
            f"The table {watch.table!r} has no column {', '.join(missing)}: fix columns=[...] "
            "of the functions watching it."
        )


def primary_key(columns: Sequence[Column]) -> list[str]:
    """The primary key's columns, in key order."""
    return [c.name for c in sorted((c for c in columns if c.pk), key=lambda c: c.pk)]


class SqliteTableTriggers(TableTriggers):
    """SQLite: one trigger per kind of change, naming each column (a trigger cannot read a
    whole row), so a changed table needs its triggers made again (`oncefire migrate`)."""

    def _value(self, ref: str, column: Column) -> str:
        """The expression (a template of tables.sql) that puts a column into a row's JSON."""
        declared = column.type.upper()
        value = f"{ref}.{quote(column.name)}"
        if "BOOL" in declared:
            return fill(self.queries["row_value_bool"], value=value)
        if "NUMERIC" in declared or "DECIMAL" in declared:
            scale = _SCALE.search(declared)
            if scale is None:
                whole, fraction = f"CAST({value} AS TEXT)", literal("%!.15g")
            else:
                fraction = literal(f"%.{scale.group(1) or 0}f")
                whole = f"printf({fraction}, {value})"
            return fill(
                self.queries["row_value_numeric"], value=value, whole=whole, fraction=fraction
            )
        name = "row_value_time" if "TIME" in declared else "row_value"
        return fill(self.queries[name], value=value)

    def qualified(self, table: str) -> str:
        return quote(table)

    def lookup(self, table: str) -> str:
        return table  # pragma_table_info and sqlite_master take the bare name

    def trigger_name(self, table: str, kind: str) -> str:
        return quote(f"oncefire_{kind}:{table}")  # SQLite's trigger names are per database

    def template_parts(self, table: str, columns: Sequence[Column], watch: Watch) -> dict[str, str]:
        keys = primary_key(columns)
        watched = list(watch.columns or [c.name for c in columns])

        def row(ref: str) -> str:
            return ", ".join(f"{literal(c.name)}, {self._value(ref, c)}" for c in columns)

        def pk(ref: str) -> str:
            return ", ".join(f"{literal(k)}, {ref}.{quote(k)}" for k in keys)

        def source(ref: str) -> str:
            return " || '/' || ".join(
                [literal(table)] + [f"coalesce({ref}.{quote(k)}, '')" for k in keys]
            )

        of = "" if watch.columns is None else " OF " + ", ".join(map(quote, watch.columns))
        return {
            "table": self.qualified(table),
            "name": literal(table),
            "row_new": row("NEW"),
            "row_old": row("OLD"),
            "pk_new": pk("NEW"),
            "pk_old": pk("OLD"),
            "source_new": source("NEW"),
            "source_old": source("OLD"),
            "update_of": of,
            "changed": " OR ".join(f"OLD.{quote(c)} IS NOT NEW.{quote(c)}" for c in watched),
        }


class PostgresTableTriggers(TableTriggers):
    """PostgreSQL: one trigger function for every table (migration 016) reads whole rows with
    to_jsonb, and the column types from the catalogue, so a new column needs no change; the
    triggers pass it the table's name and primary key."""

    def qualified(self, table: str) -> str:
        schema, _, name = table.rpartition(".")
        return f"{quote(schema)}.{quote(name)}" if schema else quote(name)

    def trigger_name(self, table: str, kind: str) -> str:
        return quote(f"oncefire_row_{kind}")  # PostgreSQL's trigger names are per table

    def template_parts(self, table: str, columns: Sequence[Column], watch: Watch) -> dict[str, str]:
        watched = watch.columns
        if watched is None:
            changed = "OLD.* IS DISTINCT FROM NEW.*"
        else:
            changed = " OR ".join(
                f"OLD.{quote(c)} IS DISTINCT FROM NEW.{quote(c)}" for c in watched
            )
        return {
            "table": self.qualified(table),
            "arguments": ", ".join(map(literal, [table, *primary_key(columns)])),
            "update_of": "" if watched is None else " OF " + ", ".join(map(quote, watched)),
            "changed": changed,
        }
