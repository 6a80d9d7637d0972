"""Named SQL queries, read from the `.sql` files of a dialect.

Every statement a store runs lives in `stores/sql/<dialect>/<concern>.sql` under a header
line `-- name: <query_name>`, the way procrastinate keeps its SQL. A loader of a few dozen
lines does it rather than aiosql: the stores need only "the text of query X", they run it
through their own connection code (pipelines, batches, busy retries), and the core keeps
no dependency for it. Numbered files (`001_init.sql`) are migrations, not queries.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from oncefire.errors import StoreError

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")
_MIGRATION = re.compile(r"^\d{3}_")
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


@cache
def load(dialect: str) -> dict[str, str]:
    """Every named query of a dialect (all its non-migration .sql files), by name."""
    folder = resources.files("oncefire.stores").joinpath("sql", dialect)
    queries: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql") or _MIGRATION.match(entry.name):
            continue
        for name, sql in parse(entry.read_text(encoding="utf-8"), entry.name).items():
            if name in queries:
                raise StoreError(f"The query {name!r} of {dialect} is defined in two files.")
            queries[name] = sql
    return queries


def positional(sql: str, names: tuple[str, ...]) -> str:
    """A SQLite query with `?` for its `:name` parameters, for a hot path that binds a tuple
    (sqlite3 looks each name up in a dict, once per parameter): the query's names must
    be `names`, each once, in this order, or a StoreError says which it has."""
    found = tuple(_NAMED.findall(sql))
    if found != names:
        raise StoreError(f"The query's parameters are {found}, not {names}.")
    return _NAMED.sub("?", sql)
