"""The test suite's PostgreSQL stores (tests/pg_databases.py): a test's schema is its own and
gone after it, open connections and all; the next run drops a killed run's databases, never
a live run's."""

from __future__ import annotations

import psycopg
import pytest

from oncefire import App
from tests.conftest import require_postgres
from tests.pg_databases import Databases, database_url, postgres_url, schema_name

pytestmark = pytest.mark.postgres


def databases(monkeypatch: pytest.MonkeyPatch, run: str) -> Databases:
    """The databases of a pytest process of run `run`."""
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", run)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    return Databases(postgres_url())


def names(databases: Databases) -> set[str]:
    return {name for (name,) in databases.conn.execute("SELECT datname FROM pg_database")}


@pytest.mark.slow
def test_a_run_drops_the_databases_of_a_killed_run_and_not_those_of_a_live_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_postgres()
    live = databases(monkeypatch, "aaaa000001")
    killed = databases(monkeypatch, "bbbb000002")
    killed.conn.close()  # what a killed run leaves: its database, and no hold on its run
    assert killed.name in names(live)
    later = databases(monkeypatch, "cccc000003")
    try:
        try:
            assert live.name in names(later)
            assert killed.name not in names(later)
        finally:
            live.close()  # a run drops its own when it ends
        assert live.name not in names(later)
    finally:
        later.close()


def test_each_store_is_a_schema_of_its_own_dropped_with_its_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_postgres()
    made = databases(monkeypatch, "eeee000005")
    first, second = made.create(), made.create()
    apps = [App(first), App(second)]
    try:
        apps[0].db.document("orders/o1").set({"n": 1})
        assert not apps[1].db.document("orders/o1").get().exists
        left_open = psycopg.connect(first, autocommit=True)
        made.drop(first)
        with pytest.raises(psycopg.OperationalError):
            left_open.execute("SELECT 1")
        with psycopg.connect(database_url(made.base, made.name)) as conn:
            schemas = {name for (name,) in conn.execute("SELECT nspname FROM pg_namespace")}
        assert schema_name(first) not in schemas
        assert schema_name(second) in schemas
    finally:
        for app in apps:
            app.close()
        made.close()
