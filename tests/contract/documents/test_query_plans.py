"""Queries run in the database: a declared field's index is walked (no full read), the limit
ends the read, a stream holds one page, and a query no index serves says so once."""

from __future__ import annotations

import logging
import sqlite3
import tracemalloc
from typing import Any

import pytest

from oncefire import App
from oncefire.documents.transaction import index_entries as _index_entries
from oncefire.model import codec
from oncefire.stores import queries
from oncefire.stores.documents.sql_tx import SqlTx


def fill(app: App, collection: str, count: int, **extra: Any) -> None:
    """count documents d00000... with n = their number, status paid/new and a padding,
    written through the store in one transaction (with their index entries, as a write
    makes them; no events: these tests read documents only)."""
    with app.store.read() as reading:
        fields = reading.index_fields(collection)
    with app.store.transaction() as tx:
        for n in range(count):
            data = {"n": n, "status": "paid" if n % 2 else "new", "pad": "x" * 200, **extra}
            path = f"{collection}/d{n:05d}"
            tx.put_document(path, collection, codec.encode_document(data), 1.0, 1.0)
            tx.set_index_entries(path, collection, _index_entries(data, fields))


@pytest.fixture
def orders(app: App) -> str:
    for field in ("n", "status"):
        app.db.collection("orders").index(field)
    fill(app, "orders", 3000)
    return "orders"


def plan_of(app: App, name: str, args: dict[str, Any]) -> str:
    """The database's plan of a named query, as text."""
    sql = queries.load(app.store.dialect)[name]
    if app.store.dialect == "sqlite":
        path = app.settings.store.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall()
        return "\n".join(str(r[-1]) for r in rows)
    import psycopg

    with psycopg.connect(app.settings.store, autocommit=True) as conn:
        conn.execute("ANALYZE")
        rows = conn.execute(("EXPLAIN " + sql).encode(), args).fetchall()
    return "\n".join(r[0] for r in rows)


PAGE_ARGS = {
    "collection": "orders",
    "field": "n",
    "lo": "2:",
    "hi": "2;",
    "after_value": "2:",
    "after_path": "",
    "limit": 10,
}


@pytest.mark.parametrize("name", ["index_page_asc", "index_page_desc"])
def test_an_index_walk_reads_the_index_in_order(app: App, orders: str, name: str) -> None:
    plan = plan_of(app, name, {**PAGE_ARGS, "after_value": "2;" if "desc" in name else "2:"})
    if app.store.dialect == "sqlite":
        assert "SEARCH i USING" in plan and "INDEX" in plan, plan
        assert "TEMP B-TREE" not in plan and "SCAN" not in plan, plan
    else:
        assert "oncefire_index_entries_key" in plan, plan
        assert "Seq Scan" not in plan and "Sort" not in plan, plan


def test_a_page_of_a_collection_reads_its_path_index(app: App, orders: str) -> None:
    args = {"collection": "orders", "after": "orders/d00100", "limit": 10}
    plan = plan_of(app, "documents_page", args)
    if app.store.dialect == "sqlite":
        assert "SEARCH oncefire_documents USING INDEX oncefire_documents_key" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    else:
        # (collection, path) or the path key: with one collection in the table, both fit
        assert "Index Scan using oncefire_documents_" in plan, plan
        assert "Seq Scan" not in plan and "Sort" not in plan, plan


def test_the_ttl_probe_is_an_index_search(app: App, orders: str) -> None:
    args = {
        "collection": "orders",
        "field": "n",
        "numbers_from": "2:",
        "numbers_until": "2:0",
        "times_from": "3:",
        "times_until": "3:0",
        "limit": 500,
    }
    plan = plan_of(app, "expired_paths", args)
    if app.store.dialect == "sqlite":
        assert plan.count("USING COVERING INDEX") == 2, plan
        assert "SCAN oncefire_index_entries" not in plan, plan
    else:
        assert plan.count("oncefire_index_entries_key") == 2, plan
        assert "Seq Scan" not in plan, plan


@pytest.fixture
def rows_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each page of a query read (index walks and collection pages)."""
    counts: list[int] = []
    index_page, documents_page = SqlTx.index_page, SqlTx.documents_page

    def counted_index(self: SqlTx, *args: Any) -> Any:
        rows = index_page(self, *args)
        counts.append(len(rows))
        return rows

    def counted_documents(self: SqlTx, *args: Any) -> Any:
        rows = documents_page(self, *args)
        counts.append(len(rows))
        return rows

    monkeypatch.setattr(SqlTx, "index_page", counted_index)
    monkeypatch.setattr(SqlTx, "documents_page", counted_documents)
    return counts


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            lambda c: c.where("status", "==", "paid").limit(10),
            [f"d{n:05d}" for n in range(1, 20, 2)],
        ),
        (lambda c: c.order_by("n").limit(10), [f"d{n:05d}" for n in range(10)]),
        (lambda c: c.order_by("n", "DESCENDING").limit(3), ["d02999", "d02998", "d02997"]),
        (lambda c: c.where("n", ">=", 2000).order_by("n").limit(2), ["d02000", "d02001"]),
        (lambda c: c.limit(10), [f"d{n:05d}" for n in range(10)]),
    ],
)
def test_the_limit_ends_the_read(
    app: App, orders: str, rows_read: list[int], build: Any, expected: list[str]
) -> None:
    found = [s.id for s in build(app.db.collection(orders)).get()]
    assert found == expected
    assert sum(rows_read) == len(expected), rows_read


@pytest.mark.slow
def test_a_stream_holds_one_page_of_a_large_collection(app: App) -> None:
    app.db.collection("big").index("n")
    fill(app, "big", 20_000)
    collection = app.db.collection("big")
    tracemalloc.start()
    try:
        seen = sum(1 for _ in collection.order_by("n").stream())
        _, stream_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        seen_scan = sum(1 for _ in collection.stream())
        _, scan_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        everything = collection.get()
        _, total = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == seen_scan == len(everything) == 20_000
    assert stream_peak < total / 10, (stream_peak, total)
    assert scan_peak < total / 10, (scan_peak, total)


def test_a_query_no_index_serves_warns_once_naming_the_field(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    fill(app, "carts", 5)
    carts = app.db.collection("carts")
    with caplog.at_level(logging.WARNING, logger="oncefire"):
        assert len(carts.where("status", "==", "paid").get()) == 2
        assert len(carts.where("status", "==", "new").get()) == 3  # same shape: no new line
        carts.get()  # a listing reads the collection by design: no warning
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "db.collection('carts').index('status')" in warnings[0]
