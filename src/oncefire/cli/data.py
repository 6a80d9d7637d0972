"""`oncefire stats`, `oncefire doc get|set|delete` and `oncefire publish`."""

from __future__ import annotations

from typing import Any

import click

from oncefire.cli.common import echo_json, friendly, open_app, read_data, store_option
from oncefire.events import EventType
from oncefire.features.stats import stats_table
from oncefire.model.lineage import UNAUTHENTICATED, written_by

DATA_HELP = "JSON, `-` to read it from stdin, or @FILE to read it from a file."


@click.command()
@store_option
@click.option("--window", default=86400.0, show_default=True, help="Seconds of history.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def stats(store: str | None, window: float, as_json: bool) -> None:
    """Per-function figures: successes, failures, dead letters, durations."""
    app = open_app(store)
    figures = app.stats(window)
    if as_json:
        echo_json({name: s.to_dict() for name, s in figures.items()})
        return
    print_stats(figures)
    found = app.unrouted_report()
    origins = ", ".join(f"{origin} ({n})" for origin, n in found.origins[:5])
    click.echo(
        f"unrouted: {found.kept} event(s) kept for a function registered later, "
        f"{found.awaited} warned about" + (f": {origins}" if origins else "")
    )


def print_stats(figures: dict[str, Any]) -> None:
    """A table of FunctionStats."""
    click.echo(stats_table(figures))


@click.group()
def doc() -> None:
    """Read and write documents (writes start triggers like any other write)."""


@doc.command("get")
@click.argument("path")
@store_option
@friendly
def doc_get(path: str, store: str | None) -> None:
    """Print a document as JSON (exit 1 if it does not exist)."""
    snap = open_app(store).db.document(path).get()
    if not snap.exists:
        raise click.ClickException(f"No document at {path!r}.")
    echo_json(snap.to_dict())


@doc.command("set")
@click.argument("path")
@click.argument("data", metavar="DATA")
@store_option
@click.option("--merge", is_flag=True, help="Merge fields into the existing document.")
@friendly
def doc_set(path: str, data: str, store: str | None, merge: bool) -> None:
    """Create or replace a document from DATA: JSON, `-` (stdin) or @FILE."""
    fields = read_data(data, "DATA")
    app = open_app(store, is_write=True)
    ref = app.db.document(path)
    is_new = not ref.get().exists
    with written_by(UNAUTHENTICATED):  # the command line signs in as nobody
        ref.set(fields, merge=merge)
    kind = EventType.DOCUMENT_CREATED if is_new else EventType.DOCUMENT_UPDATED
    if not app.subscribers(kind, ref.path):
        click.echo(f"kept; no function subscribes to {ref.path} yet", err=True)
    click.echo(f"set {path}")


@doc.command("delete")
@click.argument("path")
@store_option
@friendly
def doc_delete(path: str, store: str | None) -> None:
    """Delete a document (exit 1 if it does not exist)."""
    db = open_app(store).db  # a store that does not exist holds no document: not made
    ref = db.document(path)
    with written_by(UNAUTHENTICATED), db.transaction() as tx:
        if not tx.get(ref).exists:
            raise click.ClickException(f"No document at {path!r}: nothing to delete.")
        tx.delete(ref)
    click.echo(f"deleted {path}")


@click.command()
@click.argument("topic")
@click.argument("data", metavar="[DATA]", required=False)
@store_option
@click.option("--attribute", "-a", multiple=True, help="KEY=VALUE, repeatable.")
@click.option("--text", help="Publish this text as the message's bytes (UTF-8), not as JSON.")
@friendly
def publish(
    topic: str, data: str | None, store: str | None, attribute: tuple[str, ...], text: str | None
) -> None:
    """Publish a message on a topic from DATA (JSON, `-` for stdin, or @FILE), or the bytes of
    --text; print its id."""
    if (data is None) == (text is None):
        raise click.ClickException(
            "Give the message as DATA (JSON) or as --text TEXT (its bytes), not both or neither."
        )
    attributes = {}
    for item in attribute:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.ClickException(f"--attribute {item!r} must be KEY=VALUE.")
        if key in attributes:
            raise click.ClickException(
                f"--attribute {key!r} is given twice: a message has one value per attribute."
            )
        attributes[key] = value
    if text is not None:
        message: Any = text.encode("utf-8", "surrogateescape")
    else:
        message = read_data(data or "", "DATA")
    app = open_app(store, is_write=True)
    click.echo(app.publish(topic, message, attributes=attributes))
    if not app.subscribers(EventType.MESSAGE_PUBLISHED, topic):
        click.echo(f"kept; no function subscribes to topic {topic} yet", err=True)
