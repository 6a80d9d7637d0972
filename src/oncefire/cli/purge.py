"""`oncefire purge`: delete the history retention lets go (docs/retention.md)."""

from __future__ import annotations

import click

from oncefire.cli.common import (
    cli_actor,
    echo_json,
    friendly,
    open_app,
    open_user_app,
    store_option,
)


@click.command()
@click.argument("app_target", metavar="[APP]", required=False)
@store_option
@click.option("--dry-run", is_flag=True, help="Count what would be purged; delete nothing.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def purge(app_target: str | None, store: str | None, dry_run: bool, as_json: bool) -> None:
    """Purge finished history past its retention, in short batches, then give the space
    back (SQLite). Dead letters and unfinished deliveries are never purged. With APP, its
    functions are checked first: a retention shorter than one's retry window is refused. A
    purge (not a dry run) is recorded in the audit log."""
    app = open_user_app(app_target, store) if app_target else open_app(store)
    counts = app.purge(dry_run=True) if dry_run else app.operators.purge(actor=cli_actor())
    if as_json:
        echo_json({"dry_run": dry_run, **counts.to_dict()})
        return
    verb = "would purge" if dry_run else "purged"
    for name, n in counts.to_dict().items():
        click.echo(f"{name:<12}{n:>10}")
    click.echo(f"{verb} {counts.total()} row(s)")
