"""Named SQL queries, read from the `.sql` files of a dialect.

Every statement a store runs lives in `stores/sql/<dialect>/<concern>.sql` under a header
line `-- name: <query_name>`, the way procrastinate keeps its SQL. A loader of a few dozen
lines does it rather than aiosql: the stores need only "the text of query X", they run it
through their own connection code (pipelines, batches, busy retries), and the core keeps
no dependency for it. Numbered files (`001_init.sql`) are migrations, read here too: this
is the one module that reads `.sql` files.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

from oncefire.errors import StoreError

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")
_MIGRATION = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
_APPLY = re.compile(r"^--\s*apply:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_NAMED = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


def parse(text: str, source: str = "<sql>") -> dict[str, str]:
    """The queries of one file by name; comment lines are dropped, a final ';' too."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line.strip())
        if header:
            name = header.group(1)
            if name in found:
                raise StoreError(f"The query {name!r} is defined twice in {source}.")
            current = found[name] = []
        elif current is not None and not line.lstrip().startswith("--"):
            current.append(line)
    queries = {
        name: "\n".join(lines).strip().removesuffix(";").strip() for name, lines in found.items()
    }
    empty = [name for name, sql in queries.items() if not sql]
    if empty:
        raise StoreError(f"The query {empty[0]!r} in {source} has no statement.")
    return queries


def _folder(dialect: str) -> Any:
    return resources.files("oncefire.stores").joinpath("sql", dialect)


@cache
def load(dialect: str) -> dict[str, str]:
    """Every named query of a dialect (all its non-migration .sql files), by name."""
    return from_folder(_folder(dialect), dialect)


def from_folder(folder: Any, label: str) -> dict[str, str]:
    """The named queries of every non-migration .sql file of a folder; a name defined in two
    files is a StoreError."""
    queries: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql") or _MIGRATION.match(entry.name):
            continue
        for name, sql in parse(entry.read_text(encoding="utf-8"), entry.name).items():
            if name in queries:
                raise StoreError(f"The query {name!r} of {label} is defined in two files.")
            queries[name] = sql
    return queries


def migrations(dialect: str) -> list[tuple[int, str]]:
    """(version, script) of every numbered migration of a dialect, in order; a line
    `-- apply: name` of a script stands for the text of `functions/name.sql` (a function's one
    CREATE OR REPLACE definition, which several migrations apply)."""
    folder = _folder(dialect)
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            text = entry.read_text(encoding="utf-8")
            found.append((int(match.group(1)), with_functions(text, folder, entry.name)))
    return sorted(found)


def with_functions(script: str, folder: Any, source: str) -> str:
    """A migration script with each `-- apply: name` line replaced by functions/name.sql."""

    def function(match: re.Match[str]) -> str:
        path = folder.joinpath("functions", f"{match.group(1)}.sql")
        if not path.is_file():
            raise StoreError(f"{source} applies {match.group(1)!r}, which has no functions file.")
        return str(path.read_text(encoding="utf-8")).rstrip()

    return _APPLY.sub(function, script)


def positional(sql: str, names: tuple[str, ...]) -> str:
    """A SQLite query with `?` for its `:name` parameters, for a hot path that binds a tuple
    (sqlite3 looks each name up in a dict, once per parameter): the query's names must
    be `names`, each once, in this order, or a StoreError says which it has."""
    found = tuple(_NAMED.findall(sql))
    if found != names:
        raise StoreError(f"The query's parameters are {found}, not {names}.")
    return _NAMED.sub("?", sql)
