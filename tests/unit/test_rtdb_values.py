"""The Realtime Database's pure parts: paths and keys, how values are normalised and shown,
push ids, the events a write makes, and the server's query order."""

from __future__ import annotations

from typing import Any

import pytest

from oncefire.errors import InvalidDocumentError, InvalidPathError
from oncefire.firebase.db import changes, ordering, push_ids, values


def test_paths_split_into_checked_keys() -> None:
    assert values.parse("/") == values.parse("") == ()
    assert values.parse("/a/b/") == ("a", "b")
    assert values.text(("a", "b")) == "/a/b"
    for bad in ("/a.b", "/a$b", "/a#", "/a[1]", "/a\x01", "/" + "k" * 769):
        with pytest.raises(InvalidPathError):
            values.parse(bad)
    with pytest.raises(InvalidPathError, match="at most 32"):
        values.parse("/k" * 33)


def test_written_values_are_normalised_as_firebase_keeps_them() -> None:
    written = {"list": ["a", None, "c"], "empty": {}, "none": None, "deep": {"x": {"y": None}}}
    assert values.normalised(written, 0) == {"list": {"0": "a", "2": "c"}}
    assert values.normalised({}, 0) is None
    assert values.normalised({".sv": "timestamp"}, 1234) == 1234
    assert values.normalised({".sv": {"increment": 2}}, 0, current=5) == 7
    assert values.normalised({".sv": {"increment": 2}}, 0, current="x") == 2
    with pytest.raises(InvalidDocumentError, match="server value"):
        values.normalised({".sv": "nope"}, 0)
    with pytest.raises(InvalidDocumentError, match="not JSON"):
        values.normalised({"f": float("nan")}, 0)
    with pytest.raises(InvalidPathError):
        values.normalised({"a/b": 1}, 0)


def test_objects_keyed_by_most_of_0_to_n_are_shown_as_lists() -> None:
    assert values.shown({"0": "a", "2": "c"}) == ["a", None, "c"]
    assert values.shown({"0": "a", "9": "b"}) == {"0": "a", "9": "b"}
    assert values.shown({"01": "a"}) == {"01": "a"}
    assert values.shown({"1": {"0": 1}}) == {"1": [1]}  # half of 0..1 is not "more than half"
    assert values.shown({"0": {"0": 1}, "1": 2}) == [[1], 2]


def test_leaves_and_values_convert_both_ways() -> None:
    tree = {"a": {"b": 1, "c": {"d": True}}, "e": "x"}
    found = values.leaves(tree, ("root",))
    assert found == {("root", "a", "b"): 1, ("root", "a", "c", "d"): True, ("root", "e"): "x"}
    assert values.from_leaves(found, ("root",)) == tree
    assert values.with_value(tree, ("a", "c", "d"), None) == {"a": {"b": 1}, "e": "x"}
    assert values.with_value(tree, ("e", "f"), 1) == {"a": tree["a"], "e": {"f": 1}}


def test_push_ids_sort_by_time_and_count_up_within_a_millisecond() -> None:
    made = [push_ids.push_id(1_700_000_000_000) for _ in range(100)]
    made += [push_ids.push_id(1_700_000_000_001), push_ids.push_id(1_700_000_000_000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(len(i) == 20 and set(i) <= set(push_ids.ALPHABET) for i in made)
    assert "".join(sorted(push_ids.ALPHABET)) == push_ids.ALPHABET


def test_a_write_changes_the_watched_paths_it_touches() -> None:
    watched = [changes.pattern("messages/{id}/original"), changes.pattern("messages")]
    before: Any = {"m1": {"original": "a", "likes": 1}, "m2": {"original": "b"}}
    after: Any = {"m1": {"original": "A", "likes": 1}, "m2": {"original": "b"}}
    top = changes.top_of(("messages", "m1"), watched)
    assert top == ("messages",)
    found = changes.changes(top, before, after, ("messages", "m1"), watched)
    assert [(c.path, c.before, c.after, c.event_type) for c in found] == [
        (("messages",), before, after, "value.updated"),
        (("messages", "m1", "original"), "a", "A", "value.updated"),
    ]
    assert changes.changes(top, before, before, ("messages", "m1"), watched) == [
        changes.ValueChange(("messages",), before, before)
    ]  # the caller skips a write that changes nothing before asking
    assert changes.same(1, 1.0) and not changes.same(1, True) and not changes.same("1", 1)


def test_queries_order_children_as_the_server_and_the_admin_sdk_do() -> None:
    node = {"b": 2, "a": None, "c": "x", "d": True, "e": {"k": 1}, "f": 2, "10": 0, "9": 0}
    window = ordering.Window(ordering.VALUE)
    assert list(ordering.apply(node, window)) == ["a", "d", "10", "9", "b", "f", "c", "e"]
    by_key = ordering.Window(ordering.KEY, first=3)
    assert list(ordering.apply(node, by_key)) == ["10", "9", "a"]  # 9 < 10 on the server
    ranged = ordering.Window(ordering.VALUE, start=1, end="x")
    assert list(ordering.apply(node, ranged)) == ["b", "f", "c"]
    assert ordering.apply("leaf", window) == "leaf"
