"""A store made by an older oncefire upgrades in place and keeps its data."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.model import codec
from oncefire.stores import migrations
from tests.contract.old_schema import build_old_store

OLD_VERSION = 4  # before the catalogue version and the one-statement document write


def make_old_store(url: str) -> None:
    """Schema 3 with one document, one indexed collection and one registered function, as
    an oncefire of that schema wrote them."""
    rows = [
        "INSERT INTO oncefire_documents (path, collection, data, create_time, update_time)"
        """ VALUES ('orders/o1', 'orders', '{"status":"paid"}', 1.5, 2.5)""",
        "INSERT INTO oncefire_index_fields (collection, field) VALUES ('orders', 'status')",
        "INSERT INTO oncefire_index_entries (collection, field, value, path)"
        """ VALUES ('orders', 'status', 'j:"paid"', 'orders/o1')""",
    ]
    build_old_store(url, OLD_VERSION, rows)


@pytest.mark.empty_store
def test_an_older_store_upgrades_in_place_and_keeps_its_documents(
    store_url: str, make_app: Callable[..., App]
) -> None:
    make_old_store(store_url)
    app = make_app()
    seen: list[Event] = []

    @app.on_document_updated("orders/{o}")
    def record(event: Event) -> None:
        seen.append(event)

    assert app.store.migrate() == migrations.latest(
        "sqlite" if "sqlite" in store_url else "postgres"
    )
    ref = app.db.document("orders/o1")
    assert ref.get().to_dict() == {"status": "paid"}
    paid = app.db.collection("orders").where("status", "==", "paid").get()
    assert [s.id for s in paid] == ["o1"]  # the old index entry still answers
    app.db.document("orders/o2").set({"status": "paid"})  # catalogue now kept
    ref.set({"status": "shipped"})  # a row from before the upgrade
    ref.set({"status": "returned"})
    app.drain()
    assert [e.raw["before"]["data"]["status"] for e in seen] == ["paid", "shipped"]
    assert seen[0].raw["before"]["create_time"] == 1.5
    assert all(e.size == len(codec.dumps(e.raw).encode()) for e in seen)
    paid = app.db.collection("orders").where("status", "==", "paid").get()
    assert [s.id for s in paid] == ["o2"]
