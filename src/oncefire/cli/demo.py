"""`oncefire demo`: the bundled orders example on an embedded store, then its dashboard."""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
from pathlib import Path

import click

from oncefire.cli.common import (
    configure_logging,
    friendly,
    refuse_memory_store,
    set_store_env,
)

DEMO_PORT = 8787

ATTEMPT_LOG = logging.getLogger("oncefire.engine.endings")  # a line per attempt ended


@click.command()
@click.option(
    "--store", default=None, help="Store URL for the demo (default: a new temporary file)."
)
@click.option(
    "--dashboard/--no-dashboard",
    "with_dashboard",
    default=None,
    help="Serve the dashboard on 127.0.0.1 after the story, until Ctrl-C "
    "[default: when run from a terminal, outside CI].",
)
@click.option(
    "--port",
    default=DEMO_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="The dashboard's port.",
)
@click.option("--tables", is_flag=True, help="The second story: functions on the app's own table.")
@click.option(
    "--force",
    "is_forced",
    is_flag=True,
    help="Write into a --store that holds functions or documents of its own.",
)
@friendly
def demo(
    store: str | None, with_dashboard: bool | None, port: int, tables: bool, is_forced: bool
) -> None:
    """Run the bundled orders example on an embedded store, print its story, then serve
    the dashboard on it until Ctrl-C (with --tables, the story of functions on an
    application's own table, docs/tables.md). A --store holding functions or documents
    the demo did not write is refused, unless --force."""
    configure_logging(stream=sys.stdout)
    ATTEMPT_LOG.setLevel(logging.DEBUG)  # every attempt, told
    if store is None:
        store = f"sqlite:///{Path(tempfile.mkdtemp(prefix='oncefire-demo-')) / 'demo.db'}"
    else:
        refuse_memory_store(store)  # the commands it prints next would find nothing
        if not is_forced:
            from oncefire.demo.guard import refuse_others_store

            refuse_others_store(store, "tables" if tables else "orders")
    set_store_env(store)
    if tables:
        from oncefire.demo.tables import app
        from oncefire.demo.tables import main as tell
    else:
        from oncefire.demo.orders import app
        from oncefire.demo.orders import main as tell

    tell()
    if with_dashboard is None:
        with_dashboard = sys.stdin.isatty() and not os.environ.get("CI")
    if with_dashboard:
        from oncefire.web.dashboard import serve

        port = free_port(port)
        click.echo(f"\ndashboard: http://127.0.0.1:{port}/ (Ctrl-C to stop)")
        ATTEMPT_LOG.setLevel(logging.INFO)
        serve(app, host="127.0.0.1", port=port)


def free_port(port: int) -> int:
    """port if nothing listens on it on 127.0.0.1, else one the system picks."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
