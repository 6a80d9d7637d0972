"""`oncefire dlq`: list, show, replay and dismiss dead letters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from oncefire.cli.common import cli_actor, echo_json, friendly, open_app, store_option
from oncefire.operations.deadletters import BULK_BATCH, DeadLetter, DeadLetters
from oncefire.operations.redaction import redact

BATCH = BULK_BATCH  # dead letters a bulk replay or dismiss changes in one transaction


@click.group()
def dlq() -> None:
    """Inspect, replay and dismiss dead letters."""


def line_of(d: DeadLetter) -> str:
    """One dead letter as a listing line."""
    error = (d.error or "").splitlines()[0][:80] if d.error else ""
    return (
        f"{d.id:>6}  {d.failed_at:%Y-%m-%d %H:%M:%S}  {d.function}  {d.source}  "
        f"attempts={d.attempts}  {error}"
    )


@dlq.command("list")
@store_option
@click.option("--function", default=None)
@click.option("--error", "error_contains", default=None, help="Only errors containing this text.")
@click.option("--group", "error_group", default=None, help="Only this error group (first line).")
@click.option("--limit", default=50, show_default=True)
@click.option("--before", default=None, type=int, help="Page: ids below this one.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def dlq_list(
    store: str | None,
    function: str | None,
    error_contains: str | None,
    error_group: str | None,
    limit: int,
    before: int | None,
    as_json: bool,
) -> None:
    """List dead letters, newest first."""
    letters = open_app(store).dead_letters.list(
        function, limit, error_contains=error_contains, error_group=error_group, before=before
    )
    if as_json:
        echo_json([redact(d.to_dict()) for d in letters])
        return
    if not letters:
        click.echo("no dead letters")
    for d in letters:
        click.echo(line_of(d))


@dlq.command("show")
@click.argument("dead_letter_id", type=int)
@store_option
@click.option(
    "--full", is_flag=True, help="The whole payload, even one over max_payload_bytes (512 KB)."
)
@friendly
def dlq_show(dead_letter_id: int, store: str | None, full: bool) -> None:
    """Show one dead letter with its payload and error (a large payload is shown truncated)."""
    echo_json(redact(open_app(store).dead_letters.get(dead_letter_id, full=full).to_dict()))


def matching(letters: DeadLetters, function: str | None, where: dict[str, str | None]) -> list[str]:
    """Listing lines of every dead letter that --all would act on."""
    lines: list[str] = []
    before = None
    while True:
        page = letters.list(
            function,
            1000,
            error_contains=where["error_contains"],
            error_group=where["error_group"],
            before=before,
        )
        lines.extend(line_of(d) for d in page)
        if len(page) < 1000:
            return lines
        before = page[-1].id


ANYWAY = click.option(
    "--anyway",
    is_flag=True,
    help="Replay even for a function the store does not know (forgotten or renamed): the "
    "deliveries wait until a function of that name returns.",
)


def dead_letter_action(verb: str, summary: str) -> Callable[[Any], Any]:
    """A `dlq VERB [ID | --all [--function F] [--error TEXT]]` command through app.operators,
    so each action is recorded in the audit trail (replay also takes --anyway)."""

    @click.argument("dead_letter_id", type=int, required=False)
    @store_option
    @click.option("--all", "is_all", is_flag=True, help=f"{verb.title()} every match.")
    @click.option("--function", default=None, help="With --all: only this function's.")
    @click.option("--error", "error_contains", default=None, help="With --all: errors with this.")
    @click.option("--group", "error_group", default=None, help="With --all: this error group.")
    @click.option("--yes", "-y", "is_confirmed", is_flag=True, help="With --all: do not ask.")
    @click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
    @friendly
    def command(
        dead_letter_id: int | None,
        store: str | None,
        is_all: bool,
        function: str | None,
        error_contains: str | None,
        error_group: str | None,
        is_confirmed: bool,
        dry_run: bool,
        anyway: bool = False,
    ) -> None:
        if is_all and dead_letter_id is not None:
            raise click.ClickException(
                f"Give a dead letter id or --all, not both ({verb} {dead_letter_id} --all)."
            )
        if not is_all and dead_letter_id is None:
            raise click.ClickException("Give a dead letter id, or --all.")
        if not is_all and (function or error_contains or error_group is not None):
            raise click.ClickException(
                "--function, --error and --group select dead letters for --all only."
            )
        where = {"error_contains": error_contains, "error_group": error_group}
        more = {"anyway": anyway} if anyway else {}
        app = open_app(store)
        letters = app.dead_letters
        if dead_letter_id is not None:
            if dry_run:
                click.echo(f"would {verb} dead letter {dead_letter_id}:")
                click.echo(line_of(letters.get(dead_letter_id)))
                return
            getattr(app.operators, verb)(dead_letter_id, actor=cli_actor(), **more)
            click.echo(f"{verb}ed {dead_letter_id}")
            return
        lines = matching(letters, function, where)
        if verb == "replay" and not anyway and not dry_run:
            letters.check_replay_all(function, error_contains, error_group)  # before asking
        if dry_run:
            click.echo(f"would {verb} {len(lines)} dead letters" + (":" if lines else ""))
            for line in lines:
                click.echo(line)
            return
        if lines and not is_confirmed:
            click.confirm(f"{verb.title()} {len(lines)} dead letters?", abort=True)

        def told(so_far: int) -> None:
            click.echo(f"{verb}ed {so_far} of {len(lines)}", err=True)

        done = getattr(app.operators, f"{verb}_all")(
            function, **where, actor=cli_actor(), batch=BATCH, on_batch=told, **more
        )
        click.echo(f"{verb}ed {done}")

    command.__doc__ = summary
    return dlq.command(verb)(ANYWAY(command) if verb == "replay" else command)


dlq_replay = dead_letter_action(
    "replay",
    "Move a dead letter (or all matches with --all) back to pending, at attempt 1, with its "
    "full payload.",
)
dlq_dismiss = dead_letter_action(
    "dismiss", "Delete a dead letter (or all matches with --all); it never runs."
)
