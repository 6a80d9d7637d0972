"""`oncefire demo --store X` writes only into a store of its own (issue 44, point 5): a store
holding someone else's functions or documents is refused with one line and left as it was,
on SQLite and PostgreSQL, unless --force; a new store, or one an earlier demo wrote, is used."""

from __future__ import annotations

import pytest

from oncefire import App
from oncefire.events import Event
from tests.e2e.cli_support import Run, assert_user_error

pytestmark = pytest.mark.e2e


@pytest.fixture
def store(store_url: str) -> str:
    """The store `run` passes as --store: a fresh SQLite file or PostgreSQL database."""
    return store_url


def users_store(url: str, *, with_function: bool) -> None:
    """A user's store: their order o1 and, if asked, a function of theirs."""
    app = App(url)
    if with_function:

        @app.on_document_created("shipments/{s}", name="ship")
        def ship(event: Event) -> None:
            pass

    app.db.document("orders/o1").set({"amount": 999, "mine": True})
    app.close()


def untouched(url: str, functions: list[str]) -> None:
    app = App(url)
    try:
        assert app.db.document("orders/o1").get().to_dict() == {"amount": 999, "mine": True}
        assert [r.name for r in app.functions.list()] == functions
        assert app.dead_letters.count() == 0
        assert not app.db.document("demo/runs").get().exists
    finally:
        app.close()


@pytest.mark.parametrize("story", [(), ("--tables",)])
def test_the_demo_refuses_a_store_with_a_users_function(
    run: Run, store: str, story: tuple[str, ...]
) -> None:
    users_store(store, with_function=True)
    refused = run("demo", *story, "--no-dashboard")
    assert_user_error(refused, "function(s) ship", "--force")
    assert "charging" not in refused.stdout
    untouched(store, ["ship"])


def test_the_demo_refuses_a_store_with_a_users_orders(run: Run, store: str) -> None:
    users_store(store, with_function=False)  # only the demo's collection, not the demo's data
    assert_user_error(run("demo", "--no-dashboard"), "orders/o1", "fresh one", "--force")
    untouched(store, [])


def test_the_demo_writes_into_such_a_store_with_force(run: Run, store: str) -> None:
    users_store(store, with_function=True)
    forced = run("demo", "--no-dashboard", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "wrote orders o1, o2 and o3" in forced.stdout
