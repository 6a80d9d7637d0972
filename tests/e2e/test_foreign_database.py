"""A database that holds tables of its own and no oncefire schema gets oncefire's tables from
`oncefire migrate` alone: `App()`, `oncefire drain` and `oncefire worker` refuse it with one
line naming `oncefire migrate`, on SQLite and PostgreSQL (issue 44, point 8). An empty
database or a file that does not exist is created as before; after `oncefire migrate`,
functions on the application's tables work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from oncefire import App
from oncefire.errors import ForeignDatabaseError
from oncefire.events import Event
from oncefire.stores.probe import StoreState, probe
from tests.e2e.cli_support import Run, assert_user_error
from tests.table_writers import Writer, make_writer

# Each test starts from a database (a schema, on PostgreSQL) with no oncefire tables.
pytestmark = pytest.mark.empty_store

APP = """
from oncefire import App

app = App()


@app.on_row_inserted("t_shop")
def placed(event):
    print("placed", event.params["id"])


@app.on_message("orders")
def ordered(event):
    pass
"""


@pytest.fixture
def store(store_url: str) -> str:
    """The store `run` passes as --store: a fresh SQLite file or PostgreSQL database."""
    return store_url


@pytest.fixture
def shop(store: str) -> Iterator[Writer]:
    """The application's own table t_shop in the store's database, and nothing of oncefire."""
    writer = make_writer("driver", store, with_store=False)
    writer.create_orders("t_shop")
    yield writer
    writer.run("DROP TABLE IF EXISTS t_shop")
    writer.close()


@pytest.fixture
def app_file(tmp_path: Path) -> Path:
    path = tmp_path / "shop_app.py"
    path.write_text(APP)
    return path


def test_an_app_refuses_a_database_that_holds_tables_of_its_own(store: str, shop: Writer) -> None:
    app = App(store)
    with pytest.raises(ForeignDatabaseError, match="`oncefire migrate`") as refused:
        app.db.document("orders/o1").set({"n": 1})
    assert "t_shop" in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1
    app.close()
    assert probe(store) is StoreState.FOREIGN  # nothing of oncefire's was added


@pytest.mark.parametrize(
    "command", [("drain",), ("worker",), ("run", "--port", "0"), ("dashboard", "--port", "0")]
)
def test_commands_that_run_an_app_refuse_it_with_one_line(
    run: Run, store: str, shop: Writer, app_file: Path, command: tuple[str, ...]
) -> None:
    name, *options = command
    assert_user_error(run(name, str(app_file), *options), "oncefire migrate", "t_shop")
    assert probe(store) is StoreState.FOREIGN


def test_oncefire_migrate_adds_the_schema_then_row_functions_work(
    run: Run, store: str, shop: Writer, app_file: Path
) -> None:
    migrated = run("migrate", str(app_file))
    assert migrated.returncode == 0, migrated.stderr
    assert "watching table t_shop" in migrated.stdout
    assert probe(store) is StoreState.ONCEFIRE
    shop.run("INSERT INTO t_shop (id, status, amount) VALUES (7, 'new', 5)")
    drained = run("drain", str(app_file))
    assert drained.returncode == 0, drained.stderr
    assert "placed 7" in drained.stdout


def test_app_migrate_is_the_same_in_code(store: str, shop: Writer) -> None:
    app = App(store)
    seen: list[object] = []

    @app.on_row_inserted("t_shop")
    def placed(event: Event) -> None:
        seen.append(event.params["id"])

    assert app.migrate() >= 1
    app.watch_tables()
    shop.run("INSERT INTO t_shop (id, status, amount) VALUES (8, 'new', 5)")
    app.drain()
    app.close()
    assert seen == [8]


def test_an_empty_database_or_a_missing_file_is_created(run: Run, store: str) -> None:
    assert probe(store) in (StoreState.MISSING, StoreState.EMPTY)
    published = run("publish", "orders", '{"n": 1}')
    assert published.returncode == 0, published.stderr
    assert probe(store) is StoreState.ONCEFIRE
    app = App(store)
    assert app.unrouted_count() == 1
    app.close()
