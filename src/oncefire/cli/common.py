"""What every command shares: the --store option, one-line errors, opening the store, and
reading JSON from an argument, stdin or a file."""

from __future__ import annotations

import getpass
import json
import logging
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import click

from oncefire.app import App
from oncefire.errors import OncefireError
from oncefire.loader import load_app
from oncefire.model import codec
from oncefire.settings import MEMORY_URLS, Settings
from oncefire.stores.probe import StoreState, probe

F = TypeVar("F", bound=Callable[..., Any])
store_option = click.option(
    "--store",
    envvar="ONCEFIRE_STORE",
    default=None,
    help="Store URL (sqlite:///path.db, postgresql://...); default: $ONCEFIRE_STORE, ./oncefire.db",
)


def friendly(fn: F) -> F:
    """Turn an OncefireError (or bad input Python refuses) into one line and exit status 1."""

    @wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OncefireError as exc:
            raise click.ClickException(str(exc).splitlines()[0]) from exc
        except RecursionError as exc:
            raise click.ClickException(
                "The input is nested too deeply: flatten it (a few hundred levels at most)."
            ) from exc

    return run  # type: ignore[return-value]


def configure_logging(verbose: bool = False, stream: Any = None) -> None:
    """Lifecycle lines on stderr (or the stream given); only the CLI configures logging."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(message)s",
        datefmt="%H:%M:%S",
        stream=stream or sys.stderr,
    )


def shown(url: str) -> str:
    """A store URL fit to print: its password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def name_store(url: str) -> None:
    """Say on stderr which store a command works on (stdout keeps only its data)."""
    click.echo(f"store: {shown(url)}", err=True)


def open_app(store: str | None, *, is_write: bool = False) -> App:
    """A bare App on the store. Commands that only read refuse a store that does not exist;
    a write may create a new store, but never adds oncefire's tables to another
    application's database (only `oncefire migrate` does)."""
    url = Settings.from_env(store=store).store
    refuse_memory_store(url)
    state = probe(url)
    is_refused = state is StoreState.FOREIGN or (
        not is_write and state in (StoreState.MISSING, StoreState.EMPTY)
    )
    if is_refused:
        held = " (the database holds other tables)" if state is StoreState.FOREIGN else ""
        raise click.ClickException(
            f"no oncefire store at {shown(url)}{held}; run `oncefire migrate` to create one "
            "(or pass --store)."
        )
    app = App(url)
    name_store(url)
    return app


def open_user_app(app_target: str, store: str | None, *, is_memory_ok: bool = False) -> App:
    """The user's App; a --store that differs from the store its code names is an error, and
    so is an in-memory store unless is_memory_ok (a command that reads no data)."""
    if store is not None and not is_memory_ok:
        refuse_memory_store(store)
    app = load_app(app_target, store=store)
    if not is_memory_ok:
        refuse_memory_store(app.settings.store)
    name_store(app.settings.store)
    return app


def refuse_memory_store(url: str) -> None:
    """A command's store must outlive it: an in-memory store ends with the command."""
    if url in MEMORY_URLS:
        raise click.ClickException(
            f"The store {url} is in memory: it ends with this command, taking what the command "
            "writes, and holds nothing to read. Give a file (sqlite:///path.db) or a "
            "PostgreSQL URL."
        )


def read_data(text: str, what: str) -> Any:
    """JSON given as an argument, `-` (stdin) or `@file`, or a one-line error."""
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise click.ClickException(
                f"Cannot read {what} from {str(path)!r}: {reason}."
            ) from None
    try:
        return codec.parse(text, what)
    except OncefireError as exc:
        raise click.ClickException(str(exc)) from None


def echo_json(value: Any) -> None:
    """Print a value as indented JSON."""
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def set_store_env(store: str | None) -> None:
    """Make --store the default of every App the program builds."""
    if store:
        os.environ["ONCEFIRE_STORE"] = store


def cli_actor() -> str:
    """Who the audit trail names for a CLI action: "cli:" and the OS user (or just "cli")."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name for this uid (a bare container)
        return "cli"
