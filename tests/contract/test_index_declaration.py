"""Declaring a field index is atomic with respect to document writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from oncefire import App
from oncefire.query import index_key


def test_a_write_racing_an_index_declaration_is_indexed(app: App) -> None:
    app.db.document("orders/o1").set({"status": "paid"})
    writer_started = threading.Event()

    def write_during_declaration() -> None:
        writer_started.set()
        app.db.document("orders/o2").set({"status": "paid"})  # waits for the declaration

    writer = threading.Thread(target=write_during_declaration)

    def entries_of(docs: Iterator[tuple[str, dict[str, Any]]]) -> dict[str, str]:
        found = {path: index_key(rec["data"]["status"]) for path, rec in docs}
        writer.start()
        writer_started.wait(5)
        threading.Event().wait(0.3)  # give the writer every chance to slip in (it must not)
        return found

    app.db.store.declare_index("orders", "status", entries_of)
    writer.join(30)
    assert not writer.is_alive()
    with app.store.read() as tx:
        indexed = [path for path, _ in tx.list_documents("orders", ("status", index_key("paid")))]
    assert indexed == ["orders/o1", "orders/o2"]
    assert [s.id for s in app.db.collection("orders").where("status", "==", "paid").get()] == [
        "o1",
        "o2",
    ]
