"""The small connection protocol the SQL store is written against: named statements run on a
connection or inside a transaction (fetch, execute, count, execute_many), for each driver."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from oncefire.stores import faults

Args = Mapping[str, Any]
Row = tuple[Any, ...]
NO_ARGS: Args = {}


class Statements(Protocol):
    """Named queries of one dialect, run on one connection or in one transaction."""

    def fetch(self, name: str, args: Args = NO_ARGS) -> list[Row]:
        """The rows a query returns."""

    def execute(self, name: str, args: Args = NO_ARGS) -> None:
        """Run a statement whose answer is not needed (it may wait in a pipeline)."""

    def count(self, name: str, args: Args = NO_ARGS) -> int:
        """Run a statement; the number of rows it changed."""

    def execute_many(self, name: str, rows: Sequence[Args]) -> None:
        """Run a statement once per set of arguments."""


# A list read with json_each this short is bound value by value all the same: a batch of one
# (per-event acknowledgement) pays less for a placeholder than for JSON and json_each.
SHORT_LIST = 16
# How a statement reads a list as JSON: `id IN (SELECT value FROM json_each(:ids))`.
_JSON_LIST = re.compile(r"\(SELECT value FROM json_each\(:(\w+)\)\)")


def expand_lists(sql: str, args: Args) -> tuple[str, Args]:
    """SQLite has no arrays: a list argument read as `(SELECT value FROM json_each(:ids))` is
    sent as JSON text, one parameter (a batch's ids: binding 512 named parameters costs half a
    millisecond), unless it is short; any other list argument `:ids` becomes `:ids_0, :ids_1,
    ...` (an empty list, nothing: SQLite accepts `IN ()`)."""
    listed = [key for key, value in args.items() if isinstance(value, _LISTS)]
    if not listed:  # most statements: nothing to expand, nothing to copy
        return sql, args
    flat = dict(args)
    lengths = []
    as_json = _json_keys(sql)
    for key in listed:
        value = flat.pop(key)
        if key in as_json and len(value) > SHORT_LIST:
            flat[key] = json.dumps(value)
        else:
            flat.update(zip(_names(key, len(value)), value, strict=True))
            lengths.append((key, len(value)))
    return (_expanded(sql, tuple(lengths)) if lengths else sql), flat


_LISTS = (list, tuple)


@functools.lru_cache(maxsize=1024)
def _names(key: str, length: int) -> tuple[str, ...]:
    """The placeholders a list of length values takes: key_0, key_1, ..."""
    return tuple(f"{key}_{i}" for i in range(length))


@functools.lru_cache(maxsize=1024)
def _json_keys(sql: str) -> frozenset[str]:
    """The list parameters a statement reads with `SELECT value FROM json_each(:name)`."""
    return frozenset(_JSON_LIST.findall(sql))


def _listed(key: str, found: re.Match[str]) -> str:
    """`(:key)` where the JSON list of key is read, the text found anywhere else."""
    return f"(:{key})" if found[1] == key else found[0]


@functools.lru_cache(maxsize=1024)
def _expanded(sql: str, lengths: tuple[tuple[str, int], ...]) -> str:
    """A statement with each list parameter replaced by as many placeholders as it has values
    (kept: a statement runs with the same lengths again and again, inside the write lock)."""
    for key, length in lengths:
        listed = ", ".join(f":{key}_{i}" for i in range(length))
        # A short list read as JSON is bound value by value: `IN (:ids_0, ...)`.
        sql = _JSON_LIST.sub(functools.partial(_listed, key), sql)
        sql = re.sub(rf":{key}\b", listed, sql)
    return sql


class SqliteStatements:
    """Named SQLite queries on one sqlite3 connection (in autocommit mode: the caller opens
    and ends transactions)."""

    def __init__(self, conn: sqlite3.Connection, queries: Mapping[str, str]) -> None:
        self.conn = conn
        self.queries = queries

    def _run(self, name: str, args: Args, answer: Callable[[sqlite3.Cursor], Any]) -> Any:
        sql, flat = expand_lists(self.queries[name], args)
        faults.before(name)
        result = answer(self.conn.execute(sql, flat))
        faults.after(name)
        return result

    def fetch(self, name: str, args: Args = NO_ARGS) -> list[Row]:
        """The rows a query returns."""
        return list(self._run(name, args, lambda c: c.fetchall()))

    def execute(self, name: str, args: Args = NO_ARGS) -> None:
        """Run a statement."""
        self._run(name, args, lambda c: None)

    def count(self, name: str, args: Args = NO_ARGS) -> int:
        """Run a statement; the number of rows it changed."""
        return int(self._run(name, args, lambda c: c.rowcount))

    def execute_many(self, name: str, rows: Sequence[Args] | Sequence[Row]) -> None:
        """Run a statement once per set of arguments (tuples for `?` placeholders)."""
        faults.before(name)
        self.conn.executemany(self.queries[name], rows)
        faults.after(name)
