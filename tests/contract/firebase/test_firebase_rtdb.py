"""oncefire.firebase.db: each call of firebase_admin.db's Reference and Query gives what the
Admin SDK gives for it, on a JSON tree kept in the store (both stores)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest

from oncefire import App
from oncefire.errors import InvalidPathError
from oncefire.firebase import db
from oncefire.firebase.db.push_ids import ALPHABET
from oncefire.firebase.registration.apps import set_default_app
from oncefire.testing import TestClock, fail_store_calls


@pytest.fixture
def default_app(app: App) -> Iterator[App]:
    set_default_app(app)
    yield app
    set_default_app(None)


def test_references_name_their_path(default_app: App) -> None:
    root = db.reference()
    ref = db.reference("/users/ada").child("posts/p1")
    assert (root.path, root.key, root.parent) == ("/", None, None)
    assert (ref.path, ref.key) == ("/users/ada/posts/p1", "p1")
    assert ref.parent == db.reference("users/ada/posts")
    for bad in ("/a.b", "/a$", "/a#", "/a[0]"):
        with pytest.raises(ValueError):
            db.reference(bad)
    with pytest.raises(InvalidPathError, match="must not start"):
        ref.child("/x")


def test_set_get_and_delete_keep_json_as_firebase_does(default_app: App) -> None:
    ref = db.reference("/data")
    ref.set({"n": 1, "f": 1.5, "yes": True, "s": "x", "list": ["a", "b"], "empty": {}, "no": None})
    assert ref.get() == {"n": 1, "f": 1.5, "yes": True, "s": "x", "list": ["a", "b"]}
    assert ref.child("list/1").get() == "b"
    assert db.reference("/missing").get() is None
    ref.child("n").set({"now": "an object"})  # a leaf becomes an object
    assert ref.child("n").get() == {"now": "an object"}
    ref.child("n/now/deeper").set(7)  # and an object's leaf becomes an object
    assert ref.child("n").get() == {"now": {"deeper": 7}}
    ref.child("n").set(2)  # an object becomes a leaf: what was under it is gone
    assert (ref.child("n").get(), ref.child("n/now").get()) == (2, None)
    ref.child("sparse").set({"0": "a", "5": "b"})  # few of 0..5: an object, not a list
    assert ref.child("sparse").get() == {"0": "a", "5": "b"}
    ref.child("list").delete()
    assert "list" not in ref.get()
    ref.child("s").set({})  # an empty object is nothing
    assert ref.child("s").get() is None
    with pytest.raises(ValueError, match="must not be None"):
        ref.set(None)
    with pytest.raises(ValueError):
        ref.set({"bad.key": 1})


def test_update_sets_several_children_at_once(default_app: App) -> None:
    ref = db.reference("/users/ada")
    ref.set({"name": "Ada", "age": 36, "langs": {"en": True}})
    ref.update({"age": 37, "langs/fr": True, "name": None, "city": "London"})
    assert ref.get() == {"age": 37, "langs": {"en": True, "fr": True}, "city": "London"}
    with pytest.raises(ValueError, match="non-empty dictionary"):
        ref.update({})


def test_push_makes_chronological_ids(default_app: App, clock: TestClock) -> None:
    messages = db.reference("/messages")
    made = [messages.push({"n": n}) for n in range(3)]  # the same millisecond
    clock.advance(0.001)
    made += [messages.push(), messages.push({"n": 9})]
    keys = [ref.key or "" for ref in made]
    assert all(len(k) == 20 and set(k) <= set(ALPHABET) for k in keys)
    assert keys == sorted(keys) and len(set(keys)) == 5
    assert list(messages.get() or {}) == keys
    assert made[3].get() == ""  # push() with no value holds an empty string


def test_server_values_are_resolved_at_the_write(default_app: App, clock: TestClock) -> None:
    ref = db.reference("/stats")
    ref.set({"at": {".sv": "timestamp"}, "hits": {".sv": {"increment": 2}}})
    ref.update({"hits": {".sv": {"increment": 3}}})
    assert ref.get() == {"at": int(clock.now() * 1000), "hits": 5}


def test_get_with_an_etag_or_shallow(default_app: App) -> None:
    ref = db.reference("/doc")
    ref.set({"a": 1, "b": {"c": 2}})
    value, etag = ref.get(etag=True)
    assert value == {"a": 1, "b": {"c": 2}}
    assert ref.get(shallow=True) == {"a": 1, "b": True}
    assert ref.get_if_changed(etag) == (False, None, None)
    assert ref.set_if_unchanged(etag, {"a": 2}) == (True, {"a": 2}, ref.get(etag=True)[1])
    changed, now, new_etag = ref.set_if_unchanged(etag, {"a": 3})  # the old etag: refused
    assert (changed, now) == (False, {"a": 2})
    assert ref.get_if_changed(etag) == (True, {"a": 2}, new_etag)
    with pytest.raises(ValueError, match="cannot both"):
        ref.get(etag=True, shallow=True)


def test_a_transaction_changes_the_value_atomically(app: App, default_app: App) -> None:
    counter = db.reference("/counter")
    assert counter.transaction(lambda n: (n or 0) + 1) == 1
    runs: list[int] = []

    def bump(n: Any) -> Any:
        runs.append(n)
        return n + 1

    with fail_store_calls(app, "write", times=2):  # contention twice: run again
        assert counter.transaction(bump) == 2
    assert (runs, counter.get()) == ([1, 1, 1], 2)

    def refuse(n: Any) -> Any:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no"):
        counter.transaction(refuse)
    with pytest.raises(ValueError, match="must not be none"):
        counter.transaction(lambda n: None)
    with fail_store_calls(app, "write", times=25), pytest.raises(db.TransactionAbortedError):
        counter.transaction(bump)
    assert counter.get() == 2


SCORES = {
    "ann": {"score": 5, "team": "red"},
    "bob": {"score": 9, "team": "blue"},
    "cat": {"score": 5, "team": "red"},
    "dan": {"score": "n/a", "team": "red"},
    "eve": {"team": "blue"},
    "fay": {"score": True, "team": "blue"},
    "gus": {"score": {"nested": 1}},
    "hal": {"score": 12, "team": "red"},
}


def test_queries_order_filter_and_limit_as_the_server_does(default_app: App) -> None:
    ref = db.reference("/scores")
    ref.set(SCORES)
    by_score = ref.order_by_child("score")
    # null (eve), true (fay), numbers, strings (dan), objects (gus); ties by key
    assert list(by_score.get()) == ["eve", "fay", "ann", "cat", "bob", "hal", "dan", "gus"]
    assert list(ref.order_by_child("score").start_at(5).end_at(9).get()) == ["ann", "cat", "bob"]
    assert list(ref.order_by_child("score").equal_to(5).get()) == ["ann", "cat"]
    assert list(ref.order_by_child("score").limit_to_last(3).get()) == ["hal", "dan", "gus"]
    top = ref.order_by_child("score").start_at(0).limit_to_first(2).get()
    assert top == OrderedDict([("ann", SCORES["ann"]), ("cat", SCORES["cat"])])
    assert list(ref.order_by_child("team").equal_to("red").get()) == ["ann", "cat", "dan", "hal"]
    assert list(ref.order_by_key().start_at("c").end_at("e").get()) == ["cat", "dan"]
    assert list(ref.order_by_key().limit_to_first(2).get()) == ["ann", "bob"]
    numbers = db.reference("/numbers")
    numbers.set({"x": 3, "y": 1, "z": 2})
    assert list(numbers.order_by_value().limit_to_last(2).get()) == ["z", "x"]
    assert db.reference("/nothing").order_by_key().get() is None
    assert ref.order_by_child("score").equal_to(1000).get() == OrderedDict()
    with pytest.raises(ValueError, match="both first and last"):
        ref.order_by_key().limit_to_first(1).limit_to_last(1)
    with pytest.raises(ValueError, match="Illegal child path"):
        ref.order_by_child("$key")


def test_the_tree_lives_in_a_reserved_collection(app: App, default_app: App) -> None:
    db.reference("/messages/m1/original").set("hello")
    stored = [(s.path, s.to_dict()) for s in app.db.collection("__rtdb__").get()]
    assert stored == [("__rtdb__/v$messages$m1$original", {"v": "hello"})]
