"""Declaring a field index is atomic with respect to document writes."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from oncefire import App
from oncefire.query import index_key
from oncefire.stores import sql_store


def in_the_store(thread: threading.Thread) -> bool:
    """Whether a thread is running (or waiting) in oncefire's store layer right now."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if f"{os.sep}oncefire{os.sep}stores{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


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
        # The writer is inside the store's write (waiting for the declaration), or done (the
        # bug: it slipped in, and the index misses its document).
        deadline = time.monotonic() + 30
        while writer.is_alive() and not in_the_store(writer):
            assert time.monotonic() < deadline, "the writer never reached the store"
            time.sleep(0.001)
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


def test_a_declaration_over_more_documents_than_a_chunk_commits_chunk_by_chunk(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 point 14: the documents already there are indexed a chunk a transaction, so
    no write waits long; writes between chunks are indexed right; queries use the index only
    once it is complete."""
    monkeypatch.setattr(sql_store, "INDEX_CHUNK", 4)
    orders = app.db.collection("orders")
    for n in range(10):
        orders.document(f"o{n:02}").set({"status": "paid" if n % 2 else "new"})
    store: Any = app.store
    real_transaction = store._index_transaction
    committed: list[int] = []

    def paid() -> list[str]:
        return sorted(s.id for s in orders.where("status", "==", "paid").get())

    def between_chunks() -> None:  # the first chunk (o00..o03) is indexed, the rest is not
        with app.store.read() as tx:
            assert tx.index_fields("orders") == ["status"]  # writes keep its entries
            assert tx.complete_index_fields("orders") == []  # queries do not use it yet
        orders.document("o01").set({"status": "new"})  # indexed already
        orders.document("o06").set({"status": "paid"})  # not yet
        orders.document("o09").delete()
        orders.document("o000").set({"status": "paid"})  # sorts before the chunks' cursor
        orders.document("o99").set({"status": "paid"})
        assert paid() == ["o000", "o03", "o05", "o06", "o07", "o99"]

    @contextmanager
    def counting_transaction() -> Iterator[Any]:
        with real_transaction() as pair:
            yield pair
        committed.append(1)
        if len(committed) == 2:  # the declaration, then the first chunk
            between_chunks()

    monkeypatch.setattr(store, "_index_transaction", counting_transaction)
    orders.index("status")
    # The declaration, three chunks (4, 4 and 2 documents), the completion.
    assert len(committed) == 5
    with app.store.read() as tx:
        assert tx.complete_index_fields("orders") == ["status"]
        by_index = [p for p, _ in tx.list_documents("orders", ("status", index_key("paid")))]
    expected = ["o000", "o03", "o05", "o06", "o07", "o99"]
    assert by_index == [f"orders/{i}" for i in expected]
    assert paid() == expected
    assert sorted(s.id for s in orders.where("status", "==", "new").get()) == [
        "o00",
        "o01",
        "o02",
        "o04",
        "o08",
    ]
