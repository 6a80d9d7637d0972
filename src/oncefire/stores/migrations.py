"""Numbered schema migrations, shipped as .sql files per dialect."""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def load(dialect: str) -> list[tuple[int, str]]:
    """(version, sql) of every migration of a dialect, in order."""
    folder = resources.files("oncefire.stores").joinpath("sql", dialect)
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    return sorted(found)


def latest(dialect: str) -> int:
    """The schema version this oncefire needs."""
    return load(dialect)[-1][0]


def statements(sql: str) -> list[str]:
    """The statements of a migration script, its -- comments dropped (they may hold ';')."""
    lines = [line.split("--", 1)[0] for line in sql.splitlines()]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
