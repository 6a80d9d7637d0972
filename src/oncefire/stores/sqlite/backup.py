"""Online backups of a SQLite store's file, and bringing one back.

A backup is `VACUUM INTO` a new file from one read transaction: in WAL mode the workers' writes
go on meanwhile, never waiting for it, and the copy is the store at one moment. The copy is
made beside its destination, checked (`PRAGMA integrity_check`), flushed to disk, then renamed
into place: a destination holds a whole, checked backup or nothing. A restore copies a backup
into place the same way, once the old store's -wal and -shm files are gone (SQLite would
replay a WAL left beside it into the restored file).
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing, suppress
from pathlib import Path

from oncefire.errors import StoreError
from oncefire.stores import queries
from oncefire.stores.sqlite.files import explained

SQL = queries.load("sqlite")
SIDE_FILES = ("-wal", "-shm", "-journal")


def _connect(path: Path, *, is_read_only: bool) -> sqlite3.Connection:
    uri = f"{path.resolve().as_uri()}?mode=ro" if is_read_only else str(path)
    return sqlite3.connect(uri, uri=is_read_only, isolation_level=None, timeout=30)


def backup(store: Path, dest: Path) -> int:
    """Copy the store at `store` into the new file `dest`, online; the copy's schema version."""
    partial = dest.with_name(f".{dest.name}.partial")
    _remove(partial)
    try:
        with closing(_connect(store, is_read_only=True)) as conn:
            conn.execute(SQL["backup_into"], {"dest": str(partial)})
        version = check(partial)
        _flush(partial)
        os.replace(partial, dest)
        _flush(dest.parent)
    except sqlite3.Error as exc:
        raise explained(str(store), exc) or StoreError(
            f"Cannot back up the SQLite store at {store} to {dest}: {exc}."
        ) from exc
    finally:
        _remove(partial)
    return version


def check(path: Path) -> int:
    """The schema version of the oncefire store in the file at path, once SQLite's integrity
    check passes on it; StoreError otherwise."""
    try:
        with closing(_connect(path, is_read_only=True)) as conn:
            found = [str(row[0]) for row in conn.execute(SQL["integrity_check"])]
            if found != ["ok"]:
                raise StoreError(
                    f"{path} fails SQLite's integrity check ({'; '.join(found[:3])}): it is "
                    "not a usable backup."
                )
            names = {str(row[0]) for row in conn.execute(SQL["probe_table_names"])}
            if "oncefire_schema" not in names:
                raise StoreError(f"{path} is a SQLite database but not an oncefire store.")
            ((version,),) = conn.execute(SQL["schema_version"]).fetchall()
            return int(version or 0)
    except sqlite3.Error as exc:
        raise explained(str(path), exc) or StoreError(
            f"Cannot read {path} as a SQLite store: {exc}."
        ) from exc


def live_leases(store: Path, now: float) -> int:
    """How many deliveries of the store at `store` a worker runs now (a lease not run out)."""
    try:
        with closing(_connect(store, is_read_only=True)) as conn:
            ((count,),) = conn.execute(SQL["live_leases"], {"now": now}).fetchall()
            return int(count)
    except sqlite3.Error as exc:
        raise explained(str(store), exc) or StoreError(
            f"Cannot read the SQLite store at {store}: {exc}."
        ) from exc


def restore(source: Path, store: Path) -> int:
    """Make the file at `store` a copy of the checked backup `source` (any store there is
    replaced: the caller has made sure no process uses it); the schema version restored."""
    version = check(source)
    partial = store.with_name(f".{store.name}.partial")
    _remove(partial)
    try:
        with (
            closing(_connect(source, is_read_only=True)) as src,
            closing(_connect(partial, is_read_only=False)) as copy,
        ):
            src.backup(copy)
        check(partial)
        _flush(partial)
        for suffix in SIDE_FILES:
            _remove(store.with_name(store.name + suffix))
        os.replace(partial, store)
        _flush(store.parent)
    except sqlite3.Error as exc:
        raise explained(str(store), exc) or StoreError(
            f"Cannot restore {source} into {store}: {exc}."
        ) from exc
    finally:
        _remove(partial)
    return version


def _flush(path: Path) -> None:
    """fsync a file or a folder (a rename is durable once its folder is flushed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    with suppress(FileNotFoundError):
        path.unlink()
