"""Numbered schema migrations, shipped as .sql files per dialect (queries.py reads them)."""

from __future__ import annotations

import re

from oncefire.stores import queries


def load(dialect: str) -> list[tuple[int, str]]:
    """(version, sql) of every migration of a dialect, in order."""
    return queries.migrations(dialect)


def latest(dialect: str) -> int:
    """The schema version this oncefire needs."""
    return load(dialect)[-1][0]


_TOKEN = re.compile(
    r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|(\$[a-z_]*\$).*?\1|\w+|;|[^\w;]""",
    re.DOTALL | re.IGNORECASE,
)


def statements(sql: str) -> list[str]:
    """The statements of a migration script, its comments dropped.

    A `;` ends a statement only outside string literals, quoted names, comments, dollar
    quotes and the BEGIN ... END body of a trigger (where CASE ... END nests too).
    """
    found: list[str] = []
    current: list[str] = []
    depth = 0
    for match in _TOKEN.finditer(sql):
        token = match.group(0)
        if token.startswith("--") or token.startswith("/*"):
            current.append(" " if token.startswith("/*") else "")
            continue
        word = token.upper()
        head = " ".join("".join(current).split()[:4]).upper()
        if (word == "BEGIN" and "TRIGGER" in head) or (word == "CASE" and depth):
            depth += 1
        elif word == "END" and depth:
            depth -= 1
        if token == ";" and depth == 0:
            found.append("".join(current).strip())
            current = []
        else:
            current.append(token)
    found.append("".join(current).strip())
    return [statement for statement in found if statement]
