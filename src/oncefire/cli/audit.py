"""`oncefire audit`: the app's code and its store's history checked for costly bugs."""

from __future__ import annotations

import click

from oncefire.cli.common import echo_json, friendly, open_user_app, store_option
from oncefire.cli.cost import check_prices, prices_option


@click.command()
@click.argument("app_target", metavar="APP")
@store_option
@click.option("--since", default="24h", show_default=True, help="History to read: 30m, 24h, 7d.")
@click.option("--json", "as_json", is_flag=True, help="Print findings and summary as JSON.")
@click.option(
    "--fail-on",
    type=click.Choice(["warning", "error"]),
    default="error",
    show_default=True,
    help="Exit 1 when a finding at or above this severity exists.",
)
@prices_option
@friendly
def audit(
    app_target: str, store: str | None, since: str, as_json: bool, fail_on: str, prices: str | None
) -> None:
    """Find retry, duplicate and loop bugs in an app's code and its store's history, and say
    what each function spends (the cost section)."""
    from oncefire.audit import parse_duration

    seconds = parse_duration(since)
    check_prices(prices)
    report = open_user_app(app_target, store, is_memory_ok=True).audit(since=seconds, prices=prices)
    if as_json:
        echo_json(report.to_dict())
    else:
        for finding in report.findings:
            click.echo(finding.to_line())
        spent = report.extra.get("cost")
        if spent is not None and spent.has_attempts:  # no history: no cost section
            click.echo(f"cost over {since}:")
            for line in spent.lines():
                click.echo(f"  {line}")
        summary = report.summary()
        click.echo(
            f"{summary['errors']} error(s), {summary['warnings']} warning(s) in "
            f"{summary['functions']} function(s) and {since} of history"
        )
    if report.is_failing(fail_on):
        raise SystemExit(1)
