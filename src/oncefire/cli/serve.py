"""Commands that run an app: worker, run, drain, and migrate (which creates a store)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from oncefire.cli.common import (
    configure_logging,
    echo_json,
    friendly,
    name_store,
    open_app,
    open_user_app,
    refuse_memory_store,
    store_option,
)

if TYPE_CHECKING:
    from oncefire.app import App
    from oncefire.web.server import HttpServer

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)


def serve_workers(
    app_target: str,
    store: str | None,
    processes: int,
    concurrency: int | None,
    verbose: bool,
    is_forced: bool,
    http: Callable[[App], AbstractContextManager[object]] | None = None,
) -> None:
    """Supervise the app's worker processes until SIGTERM or SIGINT (and run http, the HTTP
    server of `oncefire run`, on the loaded app meanwhile)."""
    from oncefire.processes.supervisor import StopSignals, check_processes, serve

    configure_logging(verbose)
    check_processes(processes, is_forced=is_forced)
    if concurrency is not None and concurrency < 1:
        raise click.ClickException("--concurrency must be at least 1.")
    status = 0
    with StopSignals() as signals:  # a signal from here on stops it, the app loading or not
        open_user_app(app_target, store)  # a mistake in the app, a store conflict: one line
        status = serve(
            app_target,
            store=store,
            processes=processes,
            concurrency=concurrency,
            signals=signals,
            is_verbose=verbose,
            alongside=http,
        )
    if status:
        raise SystemExit(status)


def _serving_options(fn: F) -> F:
    """The options of every command that supervises workers."""
    for option in reversed(
        (
            click.argument("app_target", metavar="APP"),
            store_option,
            click.option(
                "--processes",
                default=1,
                show_default=True,
                help="Worker processes to supervise (at most 4 a CPU unless --force).",
            ),
            click.option(
                "--concurrency", default=None, type=int, help="Attempts each process runs at once."
            ),
            click.option(
                "--force",
                "is_forced",
                is_flag=True,
                help="Start more than 4 worker processes a CPU all the same.",
            ),
        )
    ):
        fn = option(fn)
    return fn


@click.command()
@_serving_options
@click.option(
    "--metrics-port",
    default=None,
    type=click.IntRange(0, 65535),
    help="Serve Prometheus /metrics on this port (0: a free one).",
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option("-v", "--verbose", is_flag=True)
@friendly
def worker(
    app_target: str,
    store: str | None,
    processes: int,
    concurrency: int | None,
    is_forced: bool,
    metrics_port: int | None,
    metrics_host: str,
    verbose: bool,
) -> None:
    """Serve an app's functions until SIGTERM (APP is module:app or path/file.py)."""
    metrics = None if metrics_port is None else metrics_beside(metrics_host, metrics_port)
    serve_workers(app_target, store, processes, concurrency, verbose, is_forced, http=metrics)


def metrics_beside(host: str, port: int) -> Callable[[App], AbstractContextManager[object]]:
    """The supervisor's /metrics exporter on the loaded app (the store's figures, as the
    dashboard's /metrics gives them)."""
    from oncefire.web.dashboard.metrics import serving_metrics

    return lambda app: serving_metrics(app, host, port)


def http_beside(
    host: str, port: int, dashboard: Mapping[str, str] | None, allowed_hosts: tuple[str, ...]
) -> Callable[[App], AbstractContextManager[object]]:
    """The HTTP server of `oncefire run` on the loaded app: its HTTP functions, and the
    dashboard under /_oncefire/ unless dashboard (its tokens by secret) is None."""
    from oncefire.web.server import serve_beside

    @contextmanager
    def serving(app: App) -> Iterator[object]:
        mounts = []
        if dashboard is not None:
            from oncefire.web.dashboard.server import mount

            mounts.append(mount(app, host, tokens=dashboard, allowed_hosts=allowed_hosts))
        with serve_beside(host, port, mounts)(app) as server:
            if dashboard is not None:
                from oncefire.web.dashboard.server import PREFIX

                url = cast("HttpServer", server).url
                log.info("dashboard on %s%s/", url, PREFIX)
            yield server

    return serving


def dashboard_tokens(host: str, token_file: str | None) -> dict[str, str]:
    """The dashboard's tokens; refuse a public bind without one (before the app loads)."""
    from oncefire.web.dashboard.security import TOKEN_ENV, is_loopback, load_tokens

    tokens = load_tokens(token_file=token_file)
    if not is_loopback(host) and not tokens:
        raise click.ClickException(
            f"The dashboard would listen on {host} without a token: set {TOKEN_ENV} (or pass "
            "--token-file), or pass --no-dashboard to serve only the HTTP functions."
        )
    return tokens


@click.command()
@_serving_options
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address the HTTP server binds."
)
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="HTTP port."
)
@click.option(
    "--no-dashboard",
    "without_dashboard",
    is_flag=True,
    help="Serve only the HTTP functions (public as written: no token, no dashboard).",
)
@click.option("--token-file", default=None, help="Dashboard tokens (lines SECRET or NAME=SECRET).")
@click.option("--allow-host", multiple=True, help="Another Host the dashboard accepts.")
@click.option("-v", "--verbose", is_flag=True)
@friendly
def run(
    app_target: str,
    store: str | None,
    processes: int,
    concurrency: int | None,
    is_forced: bool,
    host: str,
    port: int,
    without_dashboard: bool,
    token_file: str | None,
    allow_host: tuple[str, ...],
    verbose: bool,
) -> None:
    """Run everything an app needs: its workers and one HTTP server with its HTTP functions
    and the dashboard under /_oncefire/ (APP is module:app or path/file.py).

    Beyond 127.0.0.1 the dashboard needs a token ($ONCEFIRE_DASHBOARD_TOKEN or --token-file);
    the HTTP functions never do: they are as public as the function makes them."""
    tokens = None if without_dashboard else dashboard_tokens(host, token_file)
    http = http_beside(host, port, tokens, allow_host)
    serve_workers(app_target, store, processes, concurrency, verbose, is_forced, http=http)


@click.command()
@click.argument("app_target", metavar="APP")
@store_option
@friendly
def drain(app_target: str, store: str | None) -> None:
    """Run every delivery due now in this process, then exit."""
    configure_logging()
    summary = open_user_app(app_target, store).drain()
    echo_json({"attempts": summary.attempts, "outcomes": summary.outcomes})


@click.command()
@click.argument("app_target", metavar="[APP]", required=False)
@store_option
@friendly
def migrate(app_target: str | None, store: str | None) -> None:
    """Create or upgrade the store's schema (the one command that creates a store), and
    install or update the triggers of the tables its row functions name (with APP, its
    functions are registered first)."""
    from oncefire.app import App

    if app_target is None:
        app = App(store)
        refuse_memory_store(app.settings.store)
        name_store(app.settings.store)
    else:
        app = open_user_app(app_target, store)
    click.echo(f"schema at version {app.migrate()}")
    for line in app.watch_tables():
        click.echo(line)


@click.command()
@click.argument("table")
@store_option
@friendly
def unwatch(table: str, store: str | None) -> None:
    """Drop the triggers oncefire made on TABLE (its row functions then get no new events
    from it until `oncefire migrate` makes them again)."""
    was_watched = open_app(store, is_write=True).unwatch_table(table)
    click.echo(f"triggers of table {table} dropped" if was_watched else f"{table} was not watched")
