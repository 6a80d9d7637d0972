"""`oncefire functions [list|pause|resume|forget|rename]`: the stored functions."""

from __future__ import annotations

import time

import click

from oncefire.cli.common import cli_actor, echo_json, friendly, open_app, store_option


def _ago(at: float | None, now: float) -> str:
    if at is None:
        return "never"
    seconds = max(now - at, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


@click.group(invoke_without_command=True)
@store_option
@click.pass_context
def functions(ctx: click.Context, store: str | None) -> None:
    """The functions the store routes events to: list (the default), pause, resume, forget,
    rename."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_functions, store=store)


@functions.command("list")
@store_option
@click.option("--json", "as_json", is_flag=True)
@friendly
def list_functions(store: str | None = None, as_json: bool = False) -> None:
    """Stored functions with trigger, last seen, pending deliveries and whether paused."""
    rows = open_app(store).functions.list()
    if as_json:
        echo_json(
            [
                {
                    "name": r.name,
                    "kind": r.kind,
                    "trigger": r.source,
                    "event_types": list(r.event_types),
                    "last_seen": r.last_seen,
                    "pending": r.pending,
                    "paused": r.paused_at is not None,
                    "paused_reason": r.paused_reason,
                }
                for r in rows
            ]
        )
        return
    if not rows:
        click.echo("no stored functions")
        return
    now = time.time()
    click.echo(f"{'function':<24}{'trigger':<32}{'last seen':>12}{'pending':>9}  paused")
    for r in rows:
        paused = "-" if r.paused_at is None else f"yes ({r.paused_reason})"
        trigger = f"{r.kind} {r.source}"
        click.echo(f"{r.name:<24}{trigger:<32}{_ago(r.last_seen, now):>12}{r.pending:>9}  {paused}")


@functions.command("pause")
@click.argument("name")
@store_option
@friendly
def pause(name: str, store: str | None) -> None:
    """Pause a function: its deliveries stay pending and nothing of it runs."""
    changed = open_app(store).operators.pause(name, actor=cli_actor())
    click.echo(f"paused {name}" if changed else f"{name} was already paused")


@functions.command("resume")
@click.argument("name")
@store_option
@friendly
def resume(name: str, store: str | None) -> None:
    """Resume a paused function where it stopped."""
    changed = open_app(store).operators.resume(name, actor=cli_actor())
    click.echo(f"resumed {name}" if changed else f"{name} was not paused")


@functions.command("forget")
@click.argument("name")
@store_option
@click.option("--yes", "-y", "is_confirmed", is_flag=True, help="Do not ask.")
@friendly
def forget(name: str, store: str | None, is_confirmed: bool) -> None:
    """Stop routing events to NAME; its pending deliveries become dead letters (replayable
    once a function of that name returns)."""
    app = open_app(store)
    row = app.functions.get(name)
    if not is_confirmed:
        click.confirm(
            f"Forget {name}? Its {row.pending} pending deliveries become dead letters.",
            abort=True,
        )
    buried = app.operators.forget(name, actor=cli_actor())
    click.echo(f"forgot {name}: {buried} pending deliveries are now dead letters")


@functions.command("rename")
@click.argument("old")
@click.argument("new")
@store_option
@friendly
def rename(old: str, new: str, store: str | None) -> None:
    """Move OLD's pending deliveries, dead letters and history to NEW (a function renamed
    in code). Refused if NEW has deliveries of its own."""
    moved = open_app(store).operators.rename(old, new, actor=cli_actor())
    click.echo(
        f"renamed {old} to {new}: {moved.pending} pending deliveries and {moved.dead} dead "
        "letters moved"
    )
