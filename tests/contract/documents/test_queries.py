"""Queries: where / order_by / limit on fields, with and without a declared index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from oncefire import App, InvalidDocumentError
from oncefire.documents import CollectionReference

ORDERS: dict[str, dict[str, Any]] = {
    "o1": {"status": "paid", "amount": 500, "tags": ["gift"], "m": {"n": 1}},
    "o2": {"status": "new", "amount": 1200, "tags": ["rush", "gift"], "m": {"n": 2}},
    "o3": {"status": "paid", "amount": 50.5, "tags": []},
    "o4": {"status": "cancelled", "amount": 700},
    "o5": {"status": None, "amount": "n/a"},
    "o6": {"other": True},
}


@pytest.fixture(params=["scan", "indexed"])
def orders(app: App, request: pytest.FixtureRequest) -> CollectionReference:
    """The orders collection, with the queried fields indexed or not (results must agree)."""
    collection = app.db.collection("orders")
    if request.param == "indexed":
        collection.index("status")  # declared before some writes and after others
    for doc_id, data in ORDERS.items():
        collection.document(doc_id).set(data)
    if request.param == "indexed":
        collection.index("amount")
        collection.index("m.n")
    return collection


def ids(snaps: list[Any]) -> list[str]:
    return [s.id for s in snaps]


def test_a_collection_lists_its_documents_in_id_order(orders: CollectionReference) -> None:
    assert ids(orders.get()) == ["o1", "o2", "o3", "o4", "o5", "o6"]
    assert ids(list(orders.stream())) == ids(orders.get())


@pytest.mark.parametrize(
    ("field", "op", "value", "expected"),
    [
        ("status", "==", "paid", ["o1", "o3"]),
        ("status", "==", None, ["o5"]),
        ("status", "==", "nobody", []),
        ("amount", "==", 500.0, ["o1"]),  # 500 and 500.0 are the same number
        ("m.n", "==", 2, ["o2"]),
        ("status", "!=", "paid", ["o2", "o4"]),  # missing and null are left out
        ("amount", ">", 600, ["o2", "o4"]),
        ("amount", ">=", 700, ["o2", "o4"]),
        ("amount", "<", 500, ["o3"]),
        ("amount", "<=", 500, ["o1", "o3"]),
        ("amount", ">", "a", ["o5"]),  # ranges compare values of one type
        ("status", "in", ["new", "cancelled"], ["o2", "o4"]),
        ("status", "not-in", ["paid", "new"], ["o4"]),
        ("tags", "array-contains", "gift", ["o1", "o2"]),
        ("tags", "array-contains-any", ["rush", "none"], ["o2"]),
    ],
)
def test_where_filters_on_a_field(
    orders: CollectionReference, field: str, op: str, value: Any, expected: list[str]
) -> None:
    assert ids(orders.where(field, op, value).get()) == expected


def test_filters_combine(orders: CollectionReference) -> None:
    query = orders.where("status", "==", "paid").where("amount", ">", 100)
    assert ids(query.get()) == ["o1"]


def test_order_by_leaves_out_documents_without_the_field(orders: CollectionReference) -> None:
    numbers = orders.where("amount", ">=", 0)
    assert ids(numbers.order_by("amount").get()) == ["o3", "o1", "o4", "o2"]
    assert ids(numbers.order_by("amount", "DESCENDING").get()) == ["o2", "o4", "o1", "o3"]
    assert "o6" not in ids(orders.order_by("amount").get())


def test_order_by_sorts_mixed_types_null_first_then_numbers_then_strings(
    orders: CollectionReference,
) -> None:
    assert ids(orders.order_by("amount").get()) == ["o3", "o1", "o4", "o2", "o5"]
    assert ids(orders.order_by("status").get()) == ["o5", "o4", "o2", "o1", "o3"]


def test_order_by_several_fields(orders: CollectionReference) -> None:
    query = orders.where("status", "in", ["paid", "new"]).order_by("status").order_by("amount")
    assert ids(query.get()) == ["o2", "o3", "o1"]


def test_limit_caps_the_results(orders: CollectionReference) -> None:
    numbers = orders.where("amount", ">=", 0)
    assert ids(numbers.order_by("amount", "DESCENDING").limit(2).get()) == ["o2", "o4"]
    assert orders.limit(0).get() == []
    assert len(orders.limit(100).get()) == 6


def test_queries_are_immutable(orders: CollectionReference) -> None:
    paid = orders.where("status", "==", "paid")
    paid.where("amount", ">", 100)
    paid.limit(1)
    assert ids(paid.get()) == ["o1", "o3"]


def test_an_index_follows_updates_and_deletes(app: App) -> None:
    orders = app.db.collection("orders")
    orders.index("status")
    orders.document("a").set({"status": "new"})
    orders.document("b").set({"status": "new"})
    orders.document("a").update({"status": "paid"})
    orders.document("b").delete()
    orders.document("c").set({"status": "paid"}, merge=True)
    orders.document("c").update({"status": "paid", "x": 1})
    assert ids(orders.where("status", "==", "paid").get()) == ["a", "c"]
    assert orders.where("status", "==", "new").get() == []
    orders.document("a").set({"no_status": True})
    assert ids(orders.where("status", "==", "paid").get()) == ["c"]


def test_an_index_written_in_a_rolled_back_transaction_is_rolled_back(app: App) -> None:
    orders = app.db.collection("orders")
    orders.index("status")
    with pytest.raises(RuntimeError), app.db.transaction() as tx:
        tx.set(orders.document("a"), {"status": "paid"})
        raise RuntimeError("boom")
    assert orders.where("status", "==", "paid").get() == []


def test_an_indexed_datetime_matches_in_any_time_zone(app: App) -> None:
    orders = app.db.collection("orders")
    orders.index("at")
    at = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    orders.document("a").set({"at": at})
    elsewhere = at.astimezone(timezone(timedelta(hours=2)))
    assert ids(orders.where("at", "==", elsewhere).get()) == ["a"]
    assert ids(orders.where("at", ">=", elsewhere).get()) == ["a"]


def test_indexes_are_per_collection(app: App) -> None:
    app.db.collection("orders").index("status")
    app.db.collection("orders").document("a").set({"status": "paid"})
    app.db.collection("carts").document("a").set({"status": "paid"})
    app.db.collection("orders/a/items").document("i").set({"status": "paid"})
    assert ids(app.db.collection("orders").where("status", "==", "paid").get()) == ["a"]
    assert ids(app.db.collection("carts").where("status", "==", "paid").get()) == ["a"]
    assert ids(app.db.collection("orders/a/items").where("status", "==", "paid").get()) == ["i"]


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("where", ("a", "===", 1)),
        ("where", ("a", "in", "notalist")),
        ("where", ("a", "array-contains-any", 1)),
        ("order_by", ("a", "sideways")),
        ("limit", (-1,)),
    ],
)
def test_bad_queries_raise_invalid_document_error(
    app: App, method: str, args: tuple[Any, ...]
) -> None:
    with pytest.raises(InvalidDocumentError):
        getattr(app.db.collection("orders"), method)(*args)
