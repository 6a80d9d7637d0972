"""`oncefire backup` and `oncefire restore` (SQLite; oncefire/operations/backups.py)."""

from __future__ import annotations

import click

from oncefire.cli.common import friendly, name_store
from oncefire.clock import SystemClock
from oncefire.operations import backups


@click.command()
@click.argument("store")
@click.argument("dest")
@friendly
def backup(store: str, dest: str) -> None:
    """Copy the SQLite store STORE (sqlite:///path.db or a path) into the new file DEST while
    its workers run; the copy passes SQLite's integrity check. For PostgreSQL use pg_dump or
    pg_basebackup (docs/scaling.md, "Losing the database machine")."""
    name_store(store)
    made = backups.backup(store, dest)
    click.echo(f"backed up to {made.path}: {made.size:,} bytes, schema {made.schema}, integrity ok")


@click.command()
@click.argument("backup_file", metavar="BACKUP")
@click.argument("store")
@click.option("--force", is_flag=True, help="Replace the store at STORE (its workers stopped).")
@friendly
def restore(backup_file: str, store: str, force: bool) -> None:
    """Make STORE (sqlite:///path.db or a path) a copy of BACKUP, made by `oncefire backup`.
    An existing store is replaced only with --force, and never while its workers run."""
    name_store(store)
    made = backups.restore(backup_file, store, now=SystemClock().now(), is_forced=force)
    click.echo(f"restored {backup_file} into {made.path}: schema {made.schema}")
