"""The `oncefire` command: a thin shell over App."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from oncefire.app import App
from oncefire.errors import OncefireError
from oncefire.loader import load_app, load_module

F = TypeVar("F", bound=Callable[..., Any])
store_option = click.option(
    "--store",
    envvar="ONCEFIRE_STORE",
    default=None,
    help="Store URL (sqlite:///path.db, postgresql://...); default: $ONCEFIRE_STORE, ./oncefire.db",
)


def friendly(fn: F) -> F:
    """Turn an OncefireError into one line on stderr and exit status 1."""

    @wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OncefireError as exc:
            raise click.ClickException(str(exc).splitlines()[0]) from exc

    return run  # type: ignore[return-value]


def configure_logging(verbose: bool = False, stream: Any = None) -> None:
    """Lifecycle lines on stderr (or the stream given); only the CLI configures logging."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(message)s",
        datefmt="%H:%M:%S",
        stream=stream or sys.stderr,
    )


def open_app(store: str | None, app_target: str | None = None) -> App:
    """The user's App (with --store applied) or a bare App on the store."""
    if store:
        os.environ["ONCEFIRE_STORE"] = store
    return load_app(app_target) if app_target else App(store)


def parse_json(text: str, what: str) -> Any:
    """JSON from the command line, or a one-line error."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.ClickException(
            f"{what} is not valid JSON: {exc.msg} at column {exc.colno}."
        ) from None


def echo_json(value: Any) -> None:
    """Print a value as indented JSON."""
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


@click.group()
@click.version_option(package_name="oncefire")
def main() -> None:
    """oncefire: event-triggered Python functions that fire once in effect."""


@main.command()
@click.option(
    "--store", default=None, help="Store URL for the demo (default: a new temporary file)."
)
@friendly
def demo(store: str | None) -> None:
    """Run the bundled orders example on an embedded store and print its story."""
    path = Path(__file__).resolve().parents[2] / "examples" / "orders.py"
    if not path.is_file():
        raise click.ClickException(
            f"The demo needs examples/orders.py beside the source; not at {path}."
        )
    configure_logging(stream=sys.stdout)
    logging.getLogger("oncefire.execution").setLevel(logging.DEBUG)  # every attempt, told
    if store is None:
        store = f"sqlite:///{Path(tempfile.mkdtemp(prefix='oncefire-demo-')) / 'demo.db'}"
    os.environ["ONCEFIRE_STORE"] = store
    load_module(path).main()


def serve_workers(
    app_target: str, store: str | None, processes: int, concurrency: int | None, verbose: bool
) -> None:
    """Supervise the app's worker processes until SIGTERM or SIGINT."""
    configure_logging(verbose)
    if processes < 1:
        raise click.ClickException("--processes must be at least 1.")
    if concurrency is not None and concurrency < 1:
        raise click.ClickException("--concurrency must be at least 1.")
    from oncefire.supervisor import serve

    status = serve(
        app_target,
        store=store,
        processes=processes,
        concurrency=concurrency,
        is_verbose=verbose,
    )
    if status:
        raise SystemExit(status)


@main.command()
@click.argument("app_target", metavar="APP")
@store_option
@click.option("--processes", default=1, show_default=True, help="Worker processes to supervise.")
@click.option("--concurrency", default=None, type=int, help="Attempts each process runs at once.")
@click.option("-v", "--verbose", is_flag=True)
@friendly
def worker(
    app_target: str, store: str | None, processes: int, concurrency: int | None, verbose: bool
) -> None:
    """Serve an app's functions until SIGTERM (APP is module:app or path/file.py)."""
    serve_workers(app_target, store, processes, concurrency, verbose)


@main.command()
@click.argument("app_target", metavar="APP")
@store_option
@click.option("--processes", default=1, show_default=True, help="Worker processes to supervise.")
@click.option("--concurrency", default=None, type=int, help="Attempts each process runs at once.")
@click.option("-v", "--verbose", is_flag=True)
@friendly
def run(
    app_target: str, store: str | None, processes: int, concurrency: int | None, verbose: bool
) -> None:
    """Run everything an app needs: its workers (and later its dashboard and HTTP functions)."""
    serve_workers(app_target, store, processes, concurrency, verbose)


@main.command()
@click.argument("app_target", metavar="APP")
@store_option
@friendly
def drain(app_target: str, store: str | None) -> None:
    """Run every delivery due now in this process, then exit."""
    configure_logging()
    summary = open_app(store, app_target).drain()
    echo_json({"attempts": summary.attempts, "outcomes": summary.outcomes})


@main.command()
@store_option
@friendly
def migrate(store: str | None) -> None:
    """Create or upgrade the store's schema."""
    app = open_app(store)
    click.echo(f"schema at version {app.store.migrate()}")


@main.group()
def dlq() -> None:
    """Inspect, replay and dismiss dead letters."""


@dlq.command("list")
@store_option
@click.option("--function", default=None)
@click.option("--error", "error_contains", default=None, help="Only errors containing this text.")
@click.option("--limit", default=50, show_default=True)
@click.option("--before", default=None, type=int, help="Page: ids below this one.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def dlq_list(
    store: str | None,
    function: str | None,
    error_contains: str | None,
    limit: int,
    before: int | None,
    as_json: bool,
) -> None:
    """List dead letters, newest first."""
    letters = open_app(store).dead_letters.list(
        function, limit, error_contains=error_contains, before=before
    )
    if as_json:
        echo_json([d.to_dict() for d in letters])
        return
    if not letters:
        click.echo("no dead letters")
    for d in letters:
        error = (d.error or "").splitlines()[0][:80]
        click.echo(
            f"{d.id:>6}  {d.failed_at:%Y-%m-%d %H:%M:%S}  {d.function}  {d.source}  "
            f"attempts={d.attempts}  {error}"
        )


@dlq.command("show")
@click.argument("dead_letter_id", type=int)
@store_option
@friendly
def dlq_show(dead_letter_id: int, store: str | None) -> None:
    """Show one dead letter with its payload and error."""
    echo_json(open_app(store).dead_letters.get(dead_letter_id).to_dict())


def dead_letter_action(verb: str, summary: str) -> Callable[[Any], Any]:
    """A `dlq VERB [ID] [--all --function F --error TEXT]` command over DeadLetters."""

    @click.argument("dead_letter_id", type=int, required=False)
    @store_option
    @click.option("--all", "is_all", is_flag=True, help=f"{verb.title()} every match.")
    @click.option("--function", default=None, help="With --all: only this function's.")
    @click.option("--error", "error_contains", default=None, help="With --all: errors with this.")
    @friendly
    def command(
        dead_letter_id: int | None,
        store: str | None,
        is_all: bool,
        function: str | None,
        error_contains: str | None,
    ) -> None:
        letters = open_app(store).dead_letters
        if is_all:
            done = getattr(letters, f"{verb}_all")(function, error_contains=error_contains)
            click.echo(f"{verb}ed {done}")
        elif dead_letter_id is None:
            raise click.ClickException("Give a dead letter id, or --all.")
        else:
            getattr(letters, verb)(dead_letter_id)
            click.echo(f"{verb}ed {dead_letter_id}")

    command.__doc__ = summary
    return dlq.command(verb)(command)


dlq_replay = dead_letter_action(
    "replay", "Move a dead letter (or all matches with --all) back to pending, at attempt 1."
)
dlq_dismiss = dead_letter_action(
    "dismiss", "Delete a dead letter (or all matches with --all); it never runs."
)


@main.command()
@store_option
@click.option("--window", default=86400.0, show_default=True, help="Seconds of history.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def stats(store: str | None, window: float, as_json: bool) -> None:
    """Per-function figures: successes, failures, dead letters, durations."""
    figures = open_app(store).stats(window)
    if as_json:
        echo_json({name: s.to_dict() for name, s in figures.items()})
        return
    print_stats(figures)


def print_stats(figures: dict[str, Any]) -> None:
    """A table of FunctionStats."""
    click.echo(
        f"{'function':<24}{'ok':>6}{'failed':>8}{'rate':>7}{'dead':>6}{'pending':>9}"
        f"{'p50 s':>8}{'p95 s':>8}{'max att':>9}{'dedupe':>8}"
    )
    for name, s in figures.items():
        rate = "-" if s.success_rate is None else f"{s.success_rate:.0%}"
        p50 = "-" if s.p50_duration is None else f"{s.p50_duration:.3f}"
        p95 = "-" if s.p95_duration is None else f"{s.p95_duration:.3f}"
        click.echo(
            f"{name:<24}{s.succeeded:>6}{s.failed:>8}{rate:>7}{s.dead_letters:>6}"
            f"{s.pending:>9}{p50:>8}{p95:>8}{s.attempts_per_event_max:>9}{s.dedupe_hits:>8}"
        )


@main.group()
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
@click.argument("data")
@store_option
@click.option("--merge", is_flag=True, help="Merge fields into the existing document.")
@friendly
def doc_set(path: str, data: str, store: str | None, merge: bool) -> None:
    """Create or replace a document from JSON."""
    open_app(store).db.document(path).set(parse_json(data, "DATA"), merge=merge)
    click.echo(f"set {path}")


@doc.command("delete")
@click.argument("path")
@store_option
@friendly
def doc_delete(path: str, store: str | None) -> None:
    """Delete a document."""
    open_app(store).db.document(path).delete()
    click.echo(f"deleted {path}")


@main.command()
@click.argument("topic")
@click.argument("data")
@store_option
@click.option("--attribute", "-a", multiple=True, help="KEY=VALUE, repeatable.")
@friendly
def publish(topic: str, data: str, store: str | None, attribute: tuple[str, ...]) -> None:
    """Publish a JSON message on a topic; print its id."""
    attributes = {}
    for item in attribute:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"--attribute {item!r} must be KEY=VALUE.")
        attributes[key] = value
    click.echo(open_app(store).publish(topic, parse_json(data, "DATA"), attributes=attributes))
