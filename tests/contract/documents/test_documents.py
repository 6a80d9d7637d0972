"""Documents: set (and merge), update, delete, get, add, transforms, and bad input."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

from oncefire import (
    DELETE_FIELD,
    SERVER_TIMESTAMP,
    App,
    DocumentNotFoundError,
    DocumentTooLargeError,
    Increment,
    InvalidDocumentError,
    InvalidPathError,
    OncefireError,
)
from oncefire.events import Event
from oncefire.model.codec import MAX_DOCUMENT_BYTES
from oncefire.testing import TestClock


def watch(app: App, pattern: str = "{coll}/{doc}") -> list[Event]:
    """Record every document event on pattern (run by app.drain())."""
    seen: list[Event] = []

    @app.on_document_written(pattern, name=f"watch_{len(app.triggers)}")
    def watcher(event: Event) -> None:
        seen.append(event)

    return seen


def test_set_then_get_returns_the_fields_and_times(app: App, clock: TestClock) -> None:
    ref = app.db.collection("orders").document("o1")
    ref.set({"amount": 500, "tags": ["a"], "nested": {"x": 1}})
    snap = ref.get()
    assert snap.exists
    assert snap.id == "o1"
    assert snap.path == "orders/o1"
    assert snap.to_dict() == {"amount": 500, "tags": ["a"], "nested": {"x": 1}}
    assert snap.get("nested.x") == 1
    assert snap.get("missing", "default") == "default"
    assert snap.create_time == snap.update_time == datetime.fromtimestamp(clock.now(), UTC)


def test_a_missing_document_does_not_exist(app: App) -> None:
    snap = app.db.document("orders/nope").get()
    assert not snap.exists
    assert snap.to_dict() is None
    assert snap.get("x") is None


def test_set_replaces_and_keeps_create_time(app: App, clock: TestClock) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"a": 1, "b": 2})
    created = ref.get().create_time
    clock.advance(10)
    ref.set({"c": 3})
    snap = ref.get()
    assert snap.to_dict() == {"c": 3}
    assert snap.create_time == created
    assert snap.update_time == datetime.fromtimestamp(clock.now(), UTC)


def test_set_with_merge_merges_nested_fields(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"a": 1, "m": {"x": 1, "y": 2}, "gone": True})
    ref.set({"b": 2, "m": {"y": 3}, "gone": DELETE_FIELD}, merge=True)
    assert ref.get().to_dict() == {"a": 1, "b": 2, "m": {"x": 1, "y": 3}}


def test_set_with_merge_creates_a_missing_document(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"n": Increment(2), "x": DELETE_FIELD}, merge=True)
    assert ref.get().to_dict() == {"n": 2}


def test_update_changes_dotted_fields_and_deletes_fields(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"a": 1, "m": {"x": 1, "y": 2}, "old": "x"})
    ref.update({"m.y": 5, "m.z.deep": True, "old": DELETE_FIELD, "b": [1, 2]})
    assert ref.get().to_dict() == {"a": 1, "m": {"x": 1, "y": 5, "z": {"deep": True}}, "b": [1, 2]}


def test_update_of_a_missing_document_raises_and_writes_nothing(app: App) -> None:
    ref = app.db.document("orders/o1")
    with pytest.raises(DocumentNotFoundError, match="Use set"):
        ref.update({"a": 1})
    assert not ref.get().exists


@pytest.mark.parametrize("fields", [{}, {"a..b": 1}, {".a": 1}])
def test_update_refuses_empty_fields_and_bad_field_paths(app: App, fields: Any) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"a": 1})
    with pytest.raises(InvalidDocumentError):
        ref.update(fields)
    assert ref.get().to_dict() == {"a": 1}


def test_increment_adds_to_numbers_and_starts_missing_fields_at_zero(app: App) -> None:
    ref = app.db.document("counters/c")
    ref.set({"n": 1, "f": 0.5})
    ref.update({"n": Increment(2), "f": Increment(0.25), "new": Increment(7)})
    ref.update({"n": Increment(-1)})
    assert ref.get().to_dict() == {"n": 2, "f": 0.75, "new": 7}


def test_server_timestamp_is_the_app_clocks_time(app: App, clock: TestClock) -> None:
    clock.advance(123.5)
    ref = app.db.document("orders/o1")
    ref.set({"at": SERVER_TIMESTAMP, "m": {"at": SERVER_TIMESTAMP}})
    expected = datetime.fromtimestamp(clock.now(), UTC)
    assert ref.get().get("at") == expected
    assert ref.get().get("m.at") == expected
    clock.advance(1)
    ref.update({"later": SERVER_TIMESTAMP})
    assert ref.get().get("later") == datetime.fromtimestamp(clock.now(), UTC)


def test_datetimes_round_trip_as_aware_utc(app: App) -> None:
    at = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    ref = app.db.document("orders/o1")
    ref.set({"at": at})
    assert ref.get().get("at") == at


def test_delete_field_outside_update_or_merge_is_refused(app: App) -> None:
    ref = app.db.document("orders/o1")
    with pytest.raises(InvalidDocumentError, match="DELETE_FIELD"):
        ref.set({"a": DELETE_FIELD})
    assert not ref.get().exists


def test_delete_removes_the_document_and_deleting_twice_is_harmless(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"a": 1})
    ref.delete()
    assert not ref.get().exists
    ref.delete()
    assert not ref.get().exists


def test_add_creates_a_document_with_a_generated_id(app: App) -> None:
    orders = app.db.collection("orders")
    first = orders.add({"n": 1})
    second = orders.add({"n": 2})
    assert first.id != second.id
    assert first.path == f"orders/{first.id}"
    assert first.get().to_dict() == {"n": 1}
    assert len(orders.get()) == 2


def test_create_refuses_an_existing_document(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.create({"a": 1})
    with pytest.raises(InvalidDocumentError, match="already exists"):
        ref.create({"a": 2})
    assert ref.get().to_dict() == {"a": 1}


def test_sub_collections_are_separate_from_their_parent(app: App) -> None:
    order = app.db.collection("orders").document("o1")
    item = order.collection("items").document("i1")
    assert item.path == "orders/o1/items/i1"
    assert item.parent.path == "orders/o1/items"
    item.set({"sku": "x"})
    assert not order.get().exists
    assert app.db.collection("orders").get() == []
    assert [s.id for s in app.db.collection("orders/o1/items").get()] == ["i1"]
    assert app.db.document("orders/o1/items/i1").get().to_dict() == {"sku": "x"}


def test_snapshots_are_copies(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"m": {"x": 1}})
    snap = ref.get()
    copy = snap.to_dict()
    assert copy is not None
    copy["m"]["x"] = 99
    assert snap.get("m.x") == 1


# -- a no-op write ---------------------------------------------------------------------


def test_a_write_of_the_same_data_emits_no_update_event(app: App, clock: TestClock) -> None:
    seen = watch(app)
    ref = app.db.document("orders/o1")
    ref.set({"a": 1, "m": {"x": [1, 2]}})
    created = ref.get().update_time
    clock.advance(5)
    ref.set({"a": 1, "m": {"x": [1, 2]}})
    ref.set({"m": {"x": [1, 2]}, "a": 1})  # the same fields in another order
    ref.set({"a": 1}, merge=True)
    ref.update({"m.x": [1, 2]})
    app.drain()
    assert [e.type for e in seen] == ["document.created"]
    assert ref.get().update_time == created


def test_a_real_change_after_a_no_op_emits_one_update(app: App) -> None:
    seen = watch(app)
    ref = app.db.document("orders/o1")
    ref.set({"a": 1})
    ref.set({"a": 1})
    ref.set({"a": 1.5})
    app.drain()
    assert [e.type for e in seen] == ["document.created", "document.updated"]


def test_deleting_a_missing_document_emits_nothing(app: App) -> None:
    seen = watch(app)
    app.db.document("orders/o1").delete()
    app.drain()
    assert seen == []


# -- bad input: a specific error, a sentence saying what to do, and nothing written -------


@pytest.mark.parametrize("doc_id", ["a/b", ".", "..", "", "x" * 1501])
def test_bad_document_ids_raise_invalid_path_error(app: App, doc_id: str) -> None:
    seen = watch(app)
    with pytest.raises(InvalidPathError) as info:
        app.db.collection("orders").document(doc_id).set({"a": 1})
    assert isinstance(info.value, OncefireError)
    assert str(info.value)[0].isupper() and str(info.value).endswith(".")
    app.drain()
    assert seen == []
    assert app.db.collection("orders").get() == []


@pytest.mark.parametrize("path", ["orders/../x", "orders/./x", "orders//x", "../orders/x"])
def test_document_paths_with_bad_segments_raise_invalid_path_error(app: App, path: str) -> None:
    with pytest.raises(InvalidPathError):
        app.db.document(path)


def test_paths_of_the_wrong_depth_raise_invalid_path_error(app: App) -> None:
    with pytest.raises(InvalidPathError, match="names a collection"):
        app.db.document("orders")
    with pytest.raises(InvalidPathError, match="names a document"):
        app.db.collection("orders/o1")
    with pytest.raises(InvalidPathError, match="names a collection"):
        app.db.document("orders/o1/items")
    with pytest.raises(InvalidPathError):
        app.db.document("orders/o1").collection("a/b")


@pytest.mark.parametrize(
    "data",
    [
        {"x": math.nan},
        {"x": math.inf},
        {"x": {1, 2}},
        {"x": b"raw"},
        {"x": object()},
        {"x": datetime(2030, 1, 1)},
        {1: "not a string key"},
        {"x": {"$time": "2030-01-01T00:00:00+00:00"}},
    ],
)
def test_data_that_is_not_json_raises_invalid_document_error(app: App, data: Any) -> None:
    seen = watch(app)
    ref = app.db.document("orders/o1")
    with pytest.raises(InvalidDocumentError) as info:
        ref.set(data)
    assert str(info.value).endswith(".")
    with pytest.raises(InvalidDocumentError):
        ref.set(data, merge=True)
    assert not ref.get().exists
    ref.set({"ok": True})
    with pytest.raises(InvalidDocumentError):
        ref.update({"ok": data})
    assert ref.get().to_dict() == {"ok": True}
    app.drain()
    assert [e.type for e in seen] == ["document.created"]


@pytest.mark.parametrize("data", [[1, 2], "text", None, 5])
def test_document_data_that_is_not_a_dict_is_refused(app: App, data: Any) -> None:
    ref = app.db.document("orders/o1")
    with pytest.raises(InvalidDocumentError, match="dict"):
        ref.set(data)
    ref.set({"a": 1})
    with pytest.raises(InvalidDocumentError, match="dict"):
        ref.set(data, merge=True)
    assert ref.get().to_dict() == {"a": 1}


def test_a_document_over_one_mib_raises_and_writes_nothing(app: App) -> None:
    seen = watch(app)
    ref = app.db.document("orders/o1")
    with pytest.raises(DocumentTooLargeError, match="split it"):
        ref.set({"blob": "x" * MAX_DOCUMENT_BYTES})
    assert not ref.get().exists
    ref.set({"blob": "small"})
    with pytest.raises(DocumentTooLargeError):
        ref.update({"more": "y" * MAX_DOCUMENT_BYTES})
    assert ref.get().to_dict() == {"blob": "small"}
    app.drain()
    assert [e.type for e in seen] == ["document.created"]


def test_a_document_just_under_one_mib_is_stored(app: App) -> None:
    ref = app.db.document("orders/o1")
    ref.set({"blob": "x" * (MAX_DOCUMENT_BYTES - 100)})
    assert len(ref.get().get("blob")) == MAX_DOCUMENT_BYTES - 100
