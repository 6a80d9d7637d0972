"""`oncefire port`: a Firebase main.py's imports rewritten for oncefire.firebase."""

from __future__ import annotations

from pathlib import Path

import click

from oncefire.cli.common import friendly
from oncefire.errors import ConfigError


@click.command()
@click.argument("source", metavar="MAIN_PY", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the ported file here.")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if a name is not offered.")
@friendly
def port(source: Path, output: Path | None, check: bool) -> None:
    """Rewrite a Firebase main.py's imports (firebase_functions, firebase_admin,
    google.cloud.firestore) for oncefire.firebase and list, by line, each name it uses that
    oncefire does not offer. The ported file goes to stdout, or to -o OUT (-o MAIN_PY
    rewrites it in place). Exits 1 when a name is not offered."""
    from oncefire.firebase.porting.rewrite import port as port_text

    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {source}: {exc}.") from None
    ported = port_text(text, str(source))
    for missing in ported.missing:
        click.echo(missing.to_line(str(source)), err=True)
    if check:
        if not ported.missing:
            click.echo(f"{source}: every name is offered; {ported.rewritten} place(s) to rewrite")
    elif output is None:
        click.echo(ported.text, nl=False)
    else:
        output.write_text(ported.text, encoding="utf-8")
        click.echo(f"{source}: {ported.rewritten} place(s) rewritten into {output}", err=True)
    if ported.missing:
        raise SystemExit(1)
