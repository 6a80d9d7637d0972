"""`oncefire backup` and `oncefire restore`: a SQLite store copied while its workers run, and
brought back from such a copy (docs/scaling.md, "Losing the database machine").

A restored store goes on from the moment of its backup: pending deliveries, dead letters,
`@idempotent` records, claims and schedule ticks as they were then. Deliveries that ran after
it run again (what `tx.claim` and `@idempotent` recorded before it keeps them harmless); ones
running then are rescued once their leases run out. PostgreSQL has its own tools (pg_dump,
pg_basebackup, point-in-time recovery), and the commands say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from oncefire.errors import ConfigError
from oncefire.settings import MEMORY_URLS, check_store_url
from oncefire.stores.probe import StoreState, probe
from oncefire.stores.sqlite import backup as sqlite_backup

POSTGRES_TOOLS = (
    "back up a PostgreSQL store with pg_dump, pg_basebackup or point-in-time recovery, and "
    'fail over to a standby (docs/scaling.md, "Losing the database machine")'
)


@dataclass(frozen=True, slots=True)
class Backup:
    """A backup made or restored: its file, the schema version it holds, its size in bytes."""

    path: Path
    schema: int
    size: int


def sqlite_path(store: str) -> Path:
    """The file of a SQLite store given as a URL (sqlite:///path) or as a plain path."""
    if store.startswith(("postgresql:", "postgres:")):
        raise ConfigError(f"oncefire backs up and restores SQLite stores only: {POSTGRES_TOOLS}.")
    if store in MEMORY_URLS:
        raise ConfigError(f"The store {store} is in memory: it has no file to back up or fill.")
    if store.startswith("sqlite:"):
        check_store_url(store)
        return Path(store.removeprefix("sqlite:///"))
    if "://" in store or not store:
        raise ConfigError(f"{store!r} is not a SQLite store: give sqlite:///path.db or a path.")
    return Path(store)


def backup(store: str, dest: str | Path) -> Backup:
    """Copy the SQLite store into the new file dest, online: its workers go on meanwhile."""
    path, target = sqlite_path(store), Path(dest)
    if probe(f"sqlite:///{path}") is not StoreState.ONCEFIRE:
        raise ConfigError(f"No oncefire store at {path}: give the path of a store to back up.")
    if target.exists():
        raise ConfigError(f"{target} exists: give a new file to back up into, or remove it.")
    if not target.parent.is_dir():
        raise ConfigError(f"The folder {target.parent} does not exist: create it first.")
    schema = sqlite_backup.backup(path, target)
    return Backup(target, schema, target.stat().st_size)


def restore(source: str | Path, store: str, *, now: float, is_forced: bool = False) -> Backup:
    """Make the SQLite store a copy of the backup source. An existing store is replaced only
    when forced, and never while a worker holds a live lease on one of its deliveries."""
    path, backup_file = sqlite_path(store), Path(source)
    if not backup_file.is_file():
        raise ConfigError(f"No backup at {backup_file}: give the file `oncefire backup` made.")
    if path.exists():
        if not is_forced:
            raise ConfigError(
                f"A store exists at {path}: restoring replaces it. Stop its workers, then run "
                "again with --force, or restore into a new file."
            )
        running = 0
        if probe(f"sqlite:///{path}") is StoreState.ONCEFIRE:
            running = sqlite_backup.live_leases(path, now)
        if running:
            raise ConfigError(
                f"Workers are running {running} deliveries of the store at {path}: stop them "
                "before replacing the store."
            )
    elif not path.parent.is_dir():
        raise ConfigError(f"The folder {path.parent} does not exist: create it first.")
    schema = sqlite_backup.restore(backup_file, path)
    return Backup(path, schema, path.stat().st_size)
