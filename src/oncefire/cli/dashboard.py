"""The dashboard's commands: `oncefire dashboard`, `oncefire events show`, `oncefire audit-log`."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from oncefire.cli.common import (
    configure_logging,
    echo_json,
    friendly,
    open_app,
    open_user_app,
    store_option,
)


@click.command()
@click.argument("app_target", metavar="APP", required=False)
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8787,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on.",
)
@click.option("--token-file", default=None, help="File of tokens (lines SECRET or NAME=SECRET).")
@click.option("--allow-host", multiple=True, help="Another Host header to accept (repeatable).")
@friendly
def dashboard(
    app_target: str | None,
    store: str | None,
    host: str,
    port: int,
    token_file: str | None,
    allow_host: tuple[str, ...],
) -> None:
    """Serve the dashboard (tokens from --token-file or $ONCEFIRE_DASHBOARD_TOKEN)."""
    from oncefire.web.dashboard import serve
    from oncefire.web.dashboard.security import check_bind, load_tokens

    configure_logging()
    tokens = load_tokens(token_file=token_file)
    check_bind(host, tokens)  # before loading the app: a refusal costs nothing
    app = open_user_app(app_target, store) if app_target else open_app(store)
    app.store  # noqa: B018 - a store that cannot be opened is one line here, not a page later
    serve(
        app,
        host=host,
        port=port,
        tokens=tokens,
        allowed_hosts=allow_host,
    )


@click.group()
def events() -> None:
    """Inspect stored events."""


@events.command("show")
@click.argument("event_id")
@store_option
@friendly
def events_show(event_id: str, store: str | None) -> None:
    """Show an event's payload (secrets redacted) and every delivery's attempts."""
    echo_json(open_app(store).history.event(event_id).to_dict())


@click.command("audit-log")
@store_option
@click.option("--limit", default=50, show_default=True)
@click.option("--before", default=None, type=int, help="Page: ids below this one.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def audit_log(store: str | None, limit: int, before: int | None, as_json: bool) -> None:
    """List what operators did to deliveries (replays, dismisses, edits, bulk actions, pause,
    resume, forget, rename, purge), newest first."""
    entries = open_app(store).operators.audit_log(limit, before)
    if as_json:
        echo_json([e.to_dict() for e in entries])
        return
    if not entries:
        click.echo("no audit entries")
    for e in entries:
        when = datetime.fromtimestamp(e.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        group = e.detail.get("error_group")
        target = e.target or (
            f"group {group}" if group else e.detail.get("error_contains") or "all"
        )
        click.echo(
            f"{e.id:>6}  {when}  {e.actor}  {e.action}  {e.function or '-'}  {target}  "
            f"count={e.count}"
        )
