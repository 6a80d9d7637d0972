"""A PostgreSQL database of its own for each test, copied from a template migrated once.

The server is the one `$ONCEFIRE_TEST_POSTGRES_URL` names (its role needs CREATEDB). Each
pytest process (each xdist worker) migrates one template database, then makes every test's
database with `CREATE DATABASE ... TEMPLATE` and drops it afterwards, so tests run in
parallel. Names start with the starting database's name, `_t_` and the run's id; a run holds a
shared advisory lock on its id for as long as it lives, so the next run on the same starting
database drops what a killed run left behind, and never what a live one uses.
"""

from __future__ import annotations

import itertools
import os
import re
import uuid
import zlib
from typing import Any
from urllib.parse import urlsplit, urlunsplit

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_url() -> str:
    """The database tests start from: $ONCEFIRE_TEST_POSTGRES_URL or the local `test` db."""
    return os.environ.get("ONCEFIRE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def database_url(base: str, name: str) -> str:
    """The URL of database `name` on the server of `base`."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"/{name}"))


def database_name(url: str) -> str:
    """The database a URL names."""
    return urlsplit(url).path.lstrip("/")


def _run_key(run: str) -> int:
    """The advisory lock key of a run id (a signed 64-bit integer)."""
    return zlib.crc32(run.encode()) - 2**31


class Databases:
    """The databases this pytest process makes on the test server."""

    def __init__(self, base: str) -> None:
        import psycopg

        self.base = base
        self.prefix = f"{database_name(base)[:24]}_t_"
        # xdist gives its workers one run id; a plain run makes its own.
        self.run = os.environ.get("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)[:10]
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.conn: Any = psycopg.connect(base, autocommit=True)
        self.conn.execute("SELECT pg_advisory_lock_shared(%s)", (_run_key(self.run),))
        self._numbers = itertools.count()
        self._template: str | None = None
        self.drop_stale()

    def _name(self, suffix: str) -> str:
        return f"{self.prefix}{self.run}_{self.worker}_{suffix}"

    def drop_stale(self) -> None:
        """Drop the databases of earlier runs on the same starting database that are over."""
        pattern = re.compile(re.escape(self.prefix) + r"([0-9a-f]+)_")
        rows = self.conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (self.prefix,)
        ).fetchall()
        runs: dict[str, list[str]] = {}
        for (name,) in rows:
            if match := pattern.match(name):
                runs.setdefault(match.group(1), []).append(name)
        for run, names in runs.items():
            if run == self.run:
                continue
            key = _run_key(run)
            if not self.conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                continue  # that run is still going
            try:
                for name in names:
                    self._drop(name)
            finally:
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _drop(self, name: str) -> None:
        self.conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())

    def template(self) -> str:
        """The name of this process's migrated template, made on first use."""
        if self._template is None:
            from oncefire import App

            name = self._name("template")
            self.conn.execute(f'CREATE DATABASE "{name}"'.encode())
            app = App(database_url(self.base, name))
            try:
                app.store.migrate()
            finally:
                app.close()
            self._template = name
        return self._template

    def create(self, *, migrated: bool = True) -> str:
        """A new database, its schema migrated (or empty); its URL."""
        name = self._name(str(next(self._numbers)))
        source = self.template() if migrated else "template0"
        self.conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"'.encode())
        return database_url(self.base, name)

    def drop(self, url: str) -> None:
        """Drop a database create() made, ending the connections still open to it."""
        self._drop(database_name(url))

    def close(self) -> None:
        """Drop the template and end the run's hold."""
        if self._template is not None:
            self._drop(self._template)
        self.conn.close()
