"""A SQLite store's file as the file system sees it: its identity (a file replaced under the
store is noticed), and why it cannot be opened or written (SQLite's own words, "unable to
open database file" or "disk I/O error", name neither the path nor the cause)."""

from __future__ import annotations

import os
import shutil
import sqlite3

from oncefire.errors import StoreError, StoreUnavailableError

NEARLY_FULL = 1024 * 1024  # bytes free under which a failed write is taken for a full disk


def explained(path: str, exc: sqlite3.Error) -> StoreError | None:
    """The error a driver error on the store at path becomes when the file system tells its
    cause (a missing folder, a folder in place of the file, a read-only folder, a full disk,
    a file that is not SQLite's); None when it does not."""
    text = str(exc)
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    if "unable to open" in text or "disk I/O error" in text or "readonly" in text:
        if not os.path.isdir(folder):
            return StoreError(
                f"Cannot open the SQLite store at {full}: its folder {folder} does not exist. "
                "Create the folder (mkdir -p), or give another path."
            )
        if os.path.isdir(full):
            return StoreError(
                f"Cannot open the SQLite store at {full}: it is a folder, not a file. Give a "
                f"file's path, such as {os.path.join(full, 'oncefire.db')}."
            )
        if not os.access(folder, os.W_OK):
            return StoreUnavailableError(
                f"Cannot write the SQLite store at {full}: its folder {folder} is read-only for "
                "this process, and SQLite writes its -wal and -shm files beside the store. "
                "Give this process write access to the folder, or move the store."
            )
    if "disk is full" in text or "disk I/O error" in text:
        free = _free_bytes(folder)
        if "disk is full" in text or (free is not None and free < NEARLY_FULL):
            left = "" if free is None else f" ({free:,} bytes free)"
            return StoreUnavailableError(
                f"Cannot write the SQLite store at {full}: the disk that holds it is full{left}. "
                "Free some space; the store is written again on the next use."
            )
    if "not a database" in text:
        return StoreError(
            f"Cannot open the SQLite store at {full}: the file is not a database in SQLite's "
            "format. Give the path of an oncefire store, or of a file that does not exist yet."
        )
    return None


def _free_bytes(folder: str) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of a file, None if there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino
