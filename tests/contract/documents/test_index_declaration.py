"""Declaring a field index is atomic with respect to document writes."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from oncefire import App
from oncefire.query import index_key
from oncefire.stores.documents import sql as document_ops
from oncefire.stores.sqlite import connections as sqlite_connections
from oncefire.stores.sqlite.store import SqliteStore


def test_an_update_racing_an_index_chunk_waits_for_it_and_is_indexed(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update of a document in the chunk being indexed, sent between the chunk's read and
    its entries, waits for the chunk's transaction; the entry follows the final value. (Were
    the read and the entries two transactions, the update would land between them and the
    chunk would write the entry of the value it had read.)"""
    orders = app.db.collection("orders")
    orders.document("o1").set({"status": "new"})
    orders.document("o2").set({"status": "new"})
    writer = threading.Thread(target=lambda: orders.document("o1").set({"status": "paid"}))
    writer_waits = waiting_for_the_write_lock(app, writer, monkeypatch)

    def entries_of(docs: Iterator[tuple[str, dict[str, Any]]]) -> dict[str, str]:
        found = {path: index_key(rec["data"]["status"]) for path, rec in docs}
        writer.start()
        # The update either waits for this chunk's lock, or (the bug) is done already.
        while writer.is_alive() and not writer_waits():
            writer.join(0.001)
        return found

    app.db.store.declare_index("orders", "status", entries_of)
    writer.join(30)
    assert not writer.is_alive()
    with app.store.read() as tx:
        by_index = {
            status: [p for p, _ in tx.list_documents("orders", ("status", index_key(status)))]
            for status in ("paid", "new")
        }
    assert by_index == {"paid": ["orders/o1"], "new": ["orders/o2"]}
    assert [s.id for s in orders.where("status", "==", "paid").get()] == ["o1"]
    assert [s.id for s in orders.where("status", "==", "new").get()] == ["o2"]


def waiting_for_the_write_lock(
    app: App, writer: threading.Thread, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], bool]:
    """A check of whether the writer thread is waiting for another transaction's lock: on
    SQLite, its BEGIN was refused as busy; on PostgreSQL, a lock on the documents table is
    not granted yet."""
    if isinstance(app.store, SqliteStore):
        refused = threading.Event()
        real_is_busy = sqlite_connections.is_busy

        def is_busy(exc: sqlite3.Error) -> bool:
            if real_is_busy(exc) and threading.current_thread() is writer:
                refused.set()
            return real_is_busy(exc)

        monkeypatch.setattr(sqlite_connections, "is_busy", is_busy)
        return refused.is_set
    import psycopg

    url = app.store.url

    def is_waiting() -> bool:
        with psycopg.connect(url, autocommit=True) as conn:
            return bool(
                conn.execute(
                    "SELECT count(*) FROM pg_locks"
                    " WHERE NOT granted AND relation = 'oncefire_documents'::regclass"
                ).fetchone()[0]  # type: ignore[index]
            )

    return is_waiting


def test_a_declaration_over_more_documents_than_a_chunk_commits_chunk_by_chunk(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 point 14: the documents already there are indexed a chunk a transaction, so
    no write waits long; writes between chunks are indexed right; queries use the index only
    once it is complete."""
    monkeypatch.setattr(document_ops, "INDEX_CHUNK", 4)
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
