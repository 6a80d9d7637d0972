"""oncefire.firebase.firestore: each call of the Firestore client's surface gives what the
Python client (google-cloud-firestore) gives for it, on both stores."""

from __future__ import annotations

import string
from datetime import UTC, datetime
from typing import Any

import pytest

from oncefire import App
from oncefire.errors import InvalidDocumentError
from oncefire.events import Event
from oncefire.firebase import firestore
from oncefire.firebase.firestore import (
    DELETE_FIELD,
    SERVER_TIMESTAMP,
    And,
    ArrayRemove,
    ArrayUnion,
    FieldFilter,
    GeoPoint,
    Increment,
    Maximum,
    Minimum,
    Or,
    Query,
)
from oncefire.testing import TestClock


@pytest.fixture
def db(app: App) -> firestore.Client:
    return firestore.client(app)


def written(app: App, pattern: str) -> list[Event]:
    """The events of the writes of documents matching pattern, as functions run them."""
    seen: list[Event] = []

    @app.on_document_written(pattern)
    def record(event: Event) -> None:
        seen.append(event)

    return seen


def ids(snapshots: Any) -> list[str]:
    return [s.id for s in snapshots]


def cities(db: firestore.Client) -> firestore.CollectionReference:
    """The cities of the client's documentation examples, with ids a..e."""
    rows: dict[str, dict[str, Any]] = {
        "a": {"name": "SF", "state": "CA", "pop": 860000, "tags": ["west", "coast"]},
        "b": {"name": "LA", "state": "CA", "pop": 3900000, "tags": ["west"]},
        "c": {"name": "DC", "state": None, "pop": 680000, "tags": ["east", "capital"]},
        "d": {"name": "Tokyo", "state": None, "pop": 9000000, "tags": []},
        "e": {"name": "Beijing", "state": None, "pop": 21500000, "tags": ["capital"]},
    }
    collection = db.collection("cities")
    for doc_id, row in rows.items():
        collection.document(doc_id).set(row)
    return collection


# -- ids, references, snapshots, write results --------------------------------------------


def test_generated_ids_are_twenty_characters_of_firestores_alphabet(db: firestore.Client) -> None:
    alphabet = set(string.ascii_letters + string.digits)
    update_time, added = db.collection("notes").add({"n": 1})
    made = [added.id, db.collection("notes").document().id, firestore.auto_id()]
    assert all(len(i) == 20 and set(i) <= alphabet for i in made)
    assert len(set(made)) == 3
    assert added.get().update_time == update_time


def test_writes_answer_a_write_result_at_the_clocks_time(
    db: firestore.Client, clock: TestClock
) -> None:
    ref = db.document("notes", "n1")
    at = datetime.fromtimestamp(clock.now(), UTC)
    assert ref.set({"a": 1}).update_time == at
    assert ref.update({"a": 2}).update_time == at
    assert db.document("notes/n2").create({"a": 1}).update_time == at
    assert ref.delete() == at
    assert not ref.get().exists


def test_a_snapshot_gets_fields_as_the_client_does(db: firestore.Client) -> None:
    ref = db.document("users/u1")
    ref.set({"name": "Ada", "address": {"city": "London"}})
    snap = ref.get()
    assert (snap.exists, snap.id, snap.reference) == (True, "u1", ref)
    assert snap.get("address.city") == "London"
    with pytest.raises(KeyError):
        snap.get("age")
    missing = db.document("users/nobody").get()
    assert (missing.exists, missing.to_dict(), missing.get("name")) == (False, None, None)
    assert ref.get(field_paths=["address.city"]).to_dict() == {"address": {"city": "London"}}
    assert ref.parent == db.collection("users") and ref.parent.parent is None
    assert db.collection("users/u1/posts").parent == ref


# -- field values and transforms ----------------------------------------------------------


def test_array_union_and_remove_work_on_the_stored_array(db: firestore.Client) -> None:
    ref = db.document("lists/l1")
    ref.set({"tags": ["a", "b", "a"], "nums": [1, 2.0, 3], "text": "x"})
    ref.update(
        {
            "tags": ArrayUnion(["b", "c", "c"]),
            "nums": ArrayRemove([2, 3.0]),  # 2 == 2.0: Firestore compares numbers by value
            "text": ArrayUnion(["y"]),  # not an array: becomes one
            "new": ArrayRemove(["z"]),  # missing: an empty array
        }
    )
    assert ref.get().to_dict() == {
        "tags": ["a", "b", "a", "c"],
        "nums": [1],
        "text": ["y"],
        "new": [],
    }
    ref.set({"tags": ArrayUnion(["q"])}, merge=True)
    assert ref.get().get("tags") == ["a", "b", "a", "c", "q"]
    db.document("lists/l2").set({"tags": ArrayUnion(["x", "x"])})
    assert db.document("lists/l2").get().to_dict() == {"tags": ["x"]}


def test_increment_bounds_timestamp_and_delete_field(
    db: firestore.Client, clock: TestClock
) -> None:
    ref = db.document("counters/c1")
    ref.set({"n": 5, "hi": 3, "lo": 3, "gone": True, "text": "t"})
    ref.update(
        {
            "n": Increment(2),
            "hi": Maximum(10),
            "lo": Minimum(1),
            "text": Maximum(4),  # not a number: set to the value
            "gone": DELETE_FIELD,
            "at": SERVER_TIMESTAMP,
        }
    )
    assert ref.get().to_dict() == {
        "n": 7,
        "hi": 10,
        "lo": 1,
        "text": 4,
        "at": datetime.fromtimestamp(clock.now(), UTC),
    }
    ref.update({"hi": Maximum(2), "lo": Minimum(2.5)})
    assert (ref.get().get("hi"), ref.get().get("lo")) == (10, 1)


def test_a_geopoint_is_kept_compared_and_ordered(db: firestore.Client) -> None:
    places = db.collection("places")
    places.document("north").set({"at": GeoPoint(60.1, 24.9)})
    places.document("south").set({"at": GeoPoint(-33.9, 18.4)})
    places.document("list").set({"at": [1]})  # arrays come after GeoPoints
    assert places.document("north").get().get("at") == GeoPoint(60.1, 24.9)
    assert ids(places.where(filter=FieldFilter("at", "==", GeoPoint(-33.9, 18.4))).get()) == [
        "south"
    ]
    assert ids(places.order_by("at").get()) == ["south", "north", "list"]
    with pytest.raises(InvalidDocumentError, match="latitude"):
        GeoPoint(91, 0)


# -- operators and filters ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("array_contains", "west", ["a", "b"]),
        ("array-contains", "capital", ["c", "e"]),
        ("array_contains_any", ["coast", "capital"], ["a", "c", "e"]),
        ("array-contains-any", ["east"], ["c"]),
        ("in", ["SF", "Tokyo", "Paris"], ["a", "d"]),
        ("not-in", ["SF", "Tokyo"], ["e", "c", "b"]),
        ("not_in", ["SF", "Tokyo"], ["e", "c", "b"]),
        ("!=", "LA", ["e", "c", "a", "d"]),
    ],
)
def test_every_operator_spelling_filters_as_firestore(
    db: firestore.Client, op: str, value: Any, expected: list[str]
) -> None:
    collection = cities(db)
    # not-in and != order by the field, as Firestore orders an inequality.
    assert (
        ids(
            collection.where(
                filter=FieldFilter("tags" if "array" in op else "name", op, value)
            ).get()
        )
        == expected
    )
    assert ids(collection.where("tags" if "array" in op else "name", op, value).get()) == expected


def test_bad_operators_and_values_are_refused_as_the_client_refuses_them(
    db: firestore.Client,
) -> None:
    collection = db.collection("cities")
    with pytest.raises(ValueError, match="Operator string 'like' is invalid"):
        collection.where(filter=FieldFilter("name", "like", "S%"))
    with pytest.raises(ValueError, match="None or NaN"):
        collection.where(filter=FieldFilter("pop", ">", None))
    with pytest.raises(ValueError, match="keyword argument 'filter'"):
        collection.where(FieldFilter("pop", ">", 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Transforms"):
        collection.where(filter=FieldFilter("pop", "==", Increment(1)))


def test_or_and_and_filters_combine(db: firestore.Client) -> None:
    collection = cities(db)
    either = Or([FieldFilter("state", "==", "CA"), FieldFilter("pop", ">", 10_000_000)])
    assert ids(collection.where(filter=either).get()) == ["a", "b", "e"]
    both = And([FieldFilter("state", "==", "CA"), FieldFilter("pop", "<", 1_000_000)])
    assert ids(collection.where(filter=both).get()) == ["a"]
    nested = Or([both, FieldFilter("name", "==", "DC")])
    assert ids(collection.where(filter=nested).get()) == ["c", "a"]  # by pop, an inequality


def test_an_inequality_orders_the_results_by_its_field(db: firestore.Client) -> None:
    collection = cities(db)
    assert ids(collection.where(filter=FieldFilter("pop", ">", 700000)).get()) == [
        "a",
        "b",
        "d",
        "e",
    ]
    assert ids(collection.where(filter=FieldFilter("pop", "<", 5_000_000)).get()) == ["c", "a", "b"]


# -- orders, limits, offset, cursors, select ----------------------------------------------


def test_order_limit_offset_and_limit_to_last(db: firestore.Client) -> None:
    by_pop = cities(db).order_by("pop", direction=Query.DESCENDING)
    assert ids(by_pop.get()) == ["e", "d", "b", "a", "c"]
    assert ids(by_pop.limit(2).get()) == ["e", "d"]
    assert ids(by_pop.offset(1).limit(2).get()) == ["d", "b"]
    assert ids(by_pop.offset(4).get()) == ["c"]
    assert ids(by_pop.limit_to_last(2).get()) == ["a", "c"]
    assert ids(by_pop.limit(0).get()) == []
    with pytest.raises(ValueError, match="cannot be streamed"):
        by_pop.limit_to_last(2).stream()


def test_ordering_by_the_document_id(db: firestore.Client) -> None:
    collection = cities(db)
    by_id = collection.order_by(firestore.FieldPath.document_id(), direction=Query.DESCENDING)
    assert ids(by_id.get()) == ["e", "d", "c", "b", "a"]
    assert ids(by_id.limit(2).get()) == ["e", "d"]
    assert ids(by_id.start_after(["c"]).get()) == ["b", "a"]
    by_state = collection.order_by("state").order_by("__name__", direction=Query.DESCENDING)
    assert ids(by_state.get()) == ["e", "d", "c", "b", "a"]


def test_cursors_with_values_cut_the_ordered_results(db: firestore.Client) -> None:
    by_pop = cities(db).order_by("pop")  # c a b d e
    assert ids(by_pop.start_at([860000]).get()) == ["a", "b", "d", "e"]
    assert ids(by_pop.start_after([860000]).get()) == ["b", "d", "e"]
    assert ids(by_pop.end_at([3900000]).get()) == ["c", "a", "b"]
    assert ids(by_pop.end_before((3900000,)).get()) == ["c", "a"]
    assert ids(by_pop.start_after({"pop": 700000}).end_before({"pop": 9000000}).get()) == ["a", "b"]
    by_state = cities(db).order_by("state").order_by("name", direction=Query.DESCENDING)
    # state None < "CA"; within a state, names descending: Tokyo DC Beijing | SF LA
    assert ids(by_state.get()) == ["d", "c", "e", "a", "b"]
    assert ids(by_state.start_after([None, "DC"]).get()) == ["e", "a", "b"]
    assert ids(by_state.start_at(["CA"]).get()) == ["a", "b"]
    with pytest.raises(ValueError, match="no fields to order on"):
        cities(db).start_at([1]).get()
    with pytest.raises(ValueError, match="does not match the order fields"):
        by_pop.start_at([1, 2]).get()


def test_a_snapshot_cursor_breaks_ties_by_document(db: firestore.Client) -> None:
    collection = db.collection("scores")
    for doc_id, score in (("p1", 5), ("p2", 7), ("p3", 7), ("p4", 7), ("p5", 9)):
        collection.document(doc_id).set({"score": score})
    by_score = collection.order_by("score")
    page = by_score.limit(2).get()
    assert ids(page) == ["p1", "p2"]
    assert ids(by_score.start_after(page[-1]).get()) == ["p3", "p4", "p5"]
    assert ids(by_score.start_at(page[-1]).limit(2).get()) == ["p2", "p3"]
    assert ids(by_score.end_before(collection.document("p4").get()).get()) == ["p1", "p2", "p3"]
    # Without order_by, a snapshot cursor orders by the document.
    assert ids(collection.start_after(collection.document("p3").get()).get()) == ["p4", "p5"]
    with pytest.raises(ValueError, match="another collection"):
        collection.start_at(_other_snapshot(db)).get()


def _other_snapshot(db: firestore.Client) -> firestore.DocumentSnapshot:
    ref = db.document("other/x")
    ref.set({"score": 1})
    return ref.get()


def test_select_keeps_only_the_named_fields(db: firestore.Client) -> None:
    collection = db.collection("people")
    collection.document("p").set({"name": "Ada", "address": {"city": "London", "zip": "N1"}})
    assert [s.to_dict() for s in collection.select(["name", "address.city"]).get()] == [
        {"name": "Ada", "address": {"city": "London"}}
    ]
    assert [s.to_dict() for s in collection.select([]).get()] == [{}]


# -- aggregation -----------------------------------------------------------------------------


def test_count_sum_and_avg_aggregate_the_query(db: firestore.Client) -> None:
    collection = cities(db)
    collection.document("f").set({"name": "Nowhere", "pop": "unknown"})  # not a number
    [[count]] = collection.count().get()
    assert (count.alias, count.value) == ("field_1", 6)
    results = (
        collection.where(filter=FieldFilter("state", "==", "CA"))
        .count(alias="n")
        .sum("pop", alias="total")
        .avg("pop")
        .get()
    )
    assert [(r.alias, r.value) for r in results[0]] == [
        ("n", 2),
        ("total", 4760000),
        ("field_3", 2380000.0),
    ]
    assert collection.order_by("pop").limit(2).count().get()[0][0].value == 2
    empty = db.collection("none")
    assert [r.value for r in empty.count().sum("x").avg("x").get()[0]] == [0, 0, None]


# -- collection groups, listings -----------------------------------------------------------


def test_a_collection_group_queries_every_collection_of_that_id(db: firestore.Client) -> None:
    db.document("posts/p1").set({"n": 1})
    db.document("users/u1/posts/p2").set({"n": 2})
    db.document("users/u2/posts/p3").set({"n": 3})
    db.document("users/u2/posts_old/p4").set({"n": 4})
    db.document("a/b/c/d/posts/p5").set({"n": 5})
    group = db.collection_group("posts")
    assert ids(group.get()) == ["p5", "p1", "p2", "p3"]  # by path: a/..., posts/..., users/...
    assert ids(group.order_by("n", direction=Query.DESCENDING).limit(2).get()) == ["p5", "p3"]
    assert ids(group.where(filter=FieldFilter("n", ">=", 2)).get()) == ["p2", "p3", "p5"]
    assert [r.value for r in group.count().get()[0]] == [4]


def test_get_all_list_documents_and_collections(db: firestore.Client) -> None:
    db.document("rooms/r1").set({"n": 1})
    db.document("rooms/r3").set({"n": 3})
    db.document("rooms/r2/messages/m1").set({"text": "hi"})  # r2 itself does not exist
    db.document("rooms/r1/members/x").set({})
    db.document("rooms/r1/messages/m2").set({})
    snaps = list(
        db.get_all([db.document("rooms/r3"), db.document("rooms/r2"), db.document("rooms/r3")])
    )
    assert [(s.id, s.exists) for s in snaps] == [("r3", True), ("r2", False)]
    assert ids(db.collection("rooms").list_documents()) == ["r1", "r2", "r3"]
    assert [c.id for c in db.document("rooms/r1").collections()] == ["members", "messages"]
    assert [c.id for c in db.collections()] == ["rooms"]
    partial = list(db.get_all([db.document("rooms/r1")], field_paths=[]))
    assert partial[0].to_dict() == {}
    assert db.recursive_delete(db.document("rooms/r1")) == 3
    assert ids(db.collection("rooms").list_documents()) == ["r2", "r3"]


# -- batches -------------------------------------------------------------------------------


def test_a_batch_commits_all_its_writes_with_their_events(app: App, db: firestore.Client) -> None:
    seen = written(app, "items/{id}")
    db.document("items/old").set({"n": 0})
    app.drain()
    seen.clear()
    batch = db.batch()
    batch.set(db.document("items/a"), {"n": 1})
    batch.create(db.document("items/b"), {"n": 2})
    batch.update(db.document("items/old"), {"n": Increment(5)})
    batch.delete(db.document("items/gone"))
    assert not db.document("items/a").get().exists  # nothing before the commit
    results = batch.commit()
    assert len(results) == 4
    assert {s.id: s.to_dict() for s in db.collection("items").get()} == {
        "a": {"n": 1},
        "b": {"n": 2},
        "old": {"n": 5},
    }
    app.drain()
    assert sorted(e.source for e in seen) == ["items/a", "items/b", "items/old"]


def test_a_batch_with_a_failing_write_writes_nothing(app: App, db: firestore.Client) -> None:
    seen = written(app, "items/{id}")
    batch = db.batch()
    batch.set(db.document("items/a"), {"n": 1})
    batch.update(db.document("items/missing"), {"n": 2})
    with pytest.raises(LookupError):
        batch.commit()
    assert not db.document("items/a").get().exists
    assert app.drain().attempts == 0
    assert seen == []
    with db.batch() as in_block:
        in_block.set(db.document("items/c"), {"n": 3})
    assert db.document("items/c").get().exists


def test_a_batch_takes_at_most_500_writes(db: firestore.Client) -> None:
    batch = db.batch()
    for n in range(500):
        batch.set(db.document(f"many/d{n}"), {"n": n})
    with pytest.raises(ValueError, match="at most 500 writes"):
        batch.set(db.document("many/one_more"), {"n": 500})
    batch.commit()
    assert db.collection("many").count().get()[0][0].value == 500
