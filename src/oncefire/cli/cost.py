"""`oncefire cost`: what each function spends, and what its failures cost a day."""

from __future__ import annotations

import click

from oncefire.cli.common import echo_json, friendly, open_app, open_user_app, store_option
from oncefire.errors import PriceTableError
from oncefire.features.prices import PriceTable


class BadPricesError(click.ClickException):
    """A --prices file that cannot be used: one line and exit status 2, as a bad option."""

    exit_code = 2


def check_prices(path: str | None) -> None:
    """Read the --prices file once before any work, so a bad one stops the command at once."""
    try:
        PriceTable.load(path)
    except PriceTableError as exc:
        raise BadPricesError(str(exc).splitlines()[0]) from exc


prices_option = click.option(
    "--prices",
    "prices",
    default=None,
    metavar="FILE",
    help="Price table (TOML) overriding the defaults; see docs/audit.md.",
)


@click.command()
@click.argument("app_target", metavar="[APP]", required=False)
@store_option
@click.option("--since", default="7d", show_default=True, help="History to read: 24h, 7d, 2w.")
@prices_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@friendly
def cost(
    app_target: str | None, store: str | None, since: str, prices: str | None, as_json: bool
) -> None:
    """Per function: invocations, failed attempts, store reads and writes, CPU seconds and an
    estimate in money; and what each function's failures cost a day at the current rate.

    APP (module:app or file.py) adds the functions it registers that have not run yet;
    without it the store's history is read alone.
    """
    from oncefire.audit import parse_duration

    seconds = parse_duration(since)
    check_prices(prices)
    app = open_user_app(app_target, store) if app_target else open_app(store)
    report = app.cost(since=seconds, prices=prices)
    if as_json:
        echo_json(report.to_dict())
        return
    for line in report.lines():
        click.echo(line)
