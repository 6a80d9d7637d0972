"""Fixtures shared by every test: real stores (a SQLite file, a PostgreSQL schema of the
test's own: pg_databases.py)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from oncefire import App
from oncefire.testing import TestClock
from tests.pg_databases import Databases
from tests.pg_databases import postgres_url as postgres_url  # re-exported for tests


def postgres_unavailable_reason() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when they can."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[test]')"
    try:
        with psycopg.connect(postgres_url(), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"no PostgreSQL at {postgres_url()} ({str(exc).strip().splitlines()[0]})"


def require_postgres() -> None:
    """Skip (or, with CI set, fail) when PostgreSQL is not reachable."""
    reason = postgres_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[Databases]:
    """This process's database on the test server, where each test gets a schema."""
    require_postgres()
    databases = Databases(postgres_url())
    yield databases
    databases.close()


@pytest.fixture
def postgres_store_url(
    request: pytest.FixtureRequest, postgres_databases: Databases
) -> Iterator[str]:
    """A PostgreSQL store of the test's own (a schema), dropped afterwards: migrated, or
    empty for a test marked `empty_store` (one that makes an older schema itself)."""
    url = postgres_databases.create(migrated=not request.node.get_closest_marker("empty_store"))
    yield url
    postgres_databases.drop(url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store of each kind: an empty SQLite file, a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/oncefire.db"
    return str(request.getfixturevalue("postgres_store_url"))


@pytest.hookimpl(tryfirst=True)  # before the parametrize marks are read
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `sqlite_only` (of what sits above the store: the CLI, the dashboard, the
    Firebase module, the docs' examples) gets the SQLite store alone, unless it is marked
    `postgres_smoke` too; the contract suite runs on both stores."""
    test = metafunc.definition
    if "store_url" not in metafunc.fixturenames or test.get_closest_marker("postgres_smoke"):
        return
    if test.get_closest_marker("sqlite_only"):  # as a mark, which the fixture's params yield to
        test.add_marker(pytest.mark.parametrize("store_url", ["sqlite"], indirect=True))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file (for tests of SQLite-only behaviour)."""
    return f"sqlite:///{tmp_path}/oncefire.db"


@pytest.fixture
def clock() -> TestClock:
    """A clock the test moves by hand."""
    return TestClock()


@pytest.fixture
def make_app(store_url: str, clock: TestClock) -> Iterator[Callable[..., App]]:
    """Build Apps on the test's store and clock; all are closed at the end."""
    apps: list[App] = []

    def build(**kwargs: Any) -> App:
        kwargs.setdefault("clock", clock)
        app = App(store_url, **kwargs)
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.close()


@pytest.fixture
def app(make_app: Callable[..., App]) -> App:
    """An App on a fresh store with a TestClock (`app.clock`)."""
    return make_app()


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--full`: run the chaos suite's long profile (20 kills, 20,000 events, ...)."""
    parser.addoption(
        "--full", action="store_true", help="chaos suite: the long profile instead of the quick one"
    )


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """A private PostgreSQL cluster for tests that restart or kill the server."""
    from tests.pg_cluster import private_cluster

    yield from private_cluster()


_fault_points: Counter[str] = Counter()  # in the process that reports, from every test's


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up the fault points each test of the sweep covered (tests/faults/conftest.py)."""
    if report.when == "teardown":
        for name, counts in report.user_properties:
            if name == "fault_points":
                _fault_points.update(cast(dict[str, int], counts))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the number of fault points the sweep covered, per path and in all."""
    if not _fault_points:
        return
    terminalreporter.section("fault-point sweep")
    for name, n in sorted(_fault_points.items()):
        terminalreporter.write_line(f"{name}: {n} fault points")
    terminalreporter.write_line(f"fault points covered: {sum(_fault_points.values())}")
