"""The `oncefire` command: a thin shell over App, one module per group of commands."""

from __future__ import annotations

import click

from oncefire.cli.audit import audit
from oncefire.cli.cost import cost
from oncefire.cli.dashboard import audit_log, dashboard, events
from oncefire.cli.data import doc, print_stats, publish, stats
from oncefire.cli.demo import demo
from oncefire.cli.dlq import dlq
from oncefire.cli.functions import functions
from oncefire.cli.port import port
from oncefire.cli.purge import purge
from oncefire.cli.serve import drain, migrate, run, unwatch, worker

__all__ = ["main", "print_stats"]


@click.group()
@click.version_option(package_name="oncefire")
def main() -> None:
    """oncefire: event-triggered Python functions that fire once in effect.

    An event whose payload is over max_payload_bytes (512 KB by default) gets one attempt:
    if it fails it goes straight to the dead letters ("payload too large for retry queue"),
    with its full payload kept so `oncefire dlq replay` works.
    """


for command in (
    demo,
    worker,
    run,
    drain,
    migrate,
    unwatch,
    dlq,
    stats,
    doc,
    publish,
    audit,
    cost,
    audit_log,
    dashboard,
    events,
    functions,
    purge,
    port,
):
    main.add_command(command)
