"""A PostgreSQL store of its own for each test: a schema in a database of the test's process.

The server is the one `$ONCEFIRE_TEST_POSTGRES_URL` names (its role needs CREATEDB). Each
pytest process (each xdist worker) creates one database, so processes run their tests side by
side; the tests of a process run one after the other, each in a schema of its own (the URL
sets `search_path`), migrated at its start and dropped at its end with whatever connections the
test left open. Dropping a schema is cheap; dropping a database forces a checkpoint of the
whole server, so there is one database per process, not per test.

Database names start with the starting database's name, `_t_` and the run's id; a run holds a
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
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_url() -> str:
    """The database tests start from: $ONCEFIRE_TEST_POSTGRES_URL or the local `test` db."""
    return os.environ.get("ONCEFIRE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def database_url(base: str, name: str, schema: str | None = None) -> str:
    """The URL of database `name` on the server of `base`, in `schema` when one is given."""
    parts = urlsplit(base)
    query = parse_qsl(parts.query)
    if schema is not None:
        given = dict(query).get("options", "")
        query = [(k, v) for k, v in query if k != "options"]
        query.append(("options", f"-csearch_path={schema} {given}".strip()))
    return urlunsplit(parts._replace(path=f"/{name}", query=urlencode(query, quote_via=quote)))


def database_name(url: str) -> str:
    """The database a URL names."""
    return urlsplit(url).path.lstrip("/")


def schema_name(url: str) -> str:
    """The schema a URL that database_url() made puts first on the search path."""
    options = dict(parse_qsl(urlsplit(url).query)).get("options", "")
    match = re.search(r"-csearch_path=(\w+)", options)
    assert match, url
    return match.group(1)


def _run_key(run: str) -> int:
    """The advisory lock key of a run id (a signed 32-bit integer)."""
    return zlib.crc32(run.encode()) - 2**31


class Databases:
    """The database this pytest process makes on the test server, and its tests' schemas."""

    def __init__(self, base: str) -> None:
        import psycopg

        self.base = base
        self.prefix = f"{database_name(base)[:24]}_t_"
        # xdist gives its workers one run id; a plain run makes its own.
        self.run = os.environ.get("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)[:10]
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.conn: Any = psycopg.connect(base, autocommit=True)
        self.conn.execute("SELECT pg_advisory_lock_shared(%s)", (_run_key(self.run),))
        self._numbers = itertools.count()
        self.drop_stale()
        self.name = f"{self.prefix}{self.run}_{worker}"
        self.conn.execute(f'CREATE DATABASE "{self.name}"'.encode())

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
                    self.conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
            finally:
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _in_database(self, *statements: str) -> None:
        """Run statements in this process's database, on a connection of their own (a test
        may end every other connection to its database)."""
        import psycopg

        with psycopg.connect(database_url(self.base, self.name), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())

    def create(self, *, migrated: bool = True) -> str:
        """A new store: a schema, migrated (or empty); its URL."""
        schema = f"s{next(self._numbers)}"
        self._in_database(f"CREATE SCHEMA {schema}")
        url = database_url(self.base, self.name, schema)
        if migrated:
            from oncefire import App

            app = App(url)
            try:
                app.store.migrate()
            finally:
                app.close()
        return url

    def drop(self, url: str) -> None:
        """Drop a store create() made, ending the connections to the database still open."""
        self._in_database(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
            f"DROP SCHEMA IF EXISTS {schema_name(url)} CASCADE",
        )

    def close(self) -> None:
        """Drop the database and end the run's hold."""
        self.conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'.encode())
        self.conn.close()
