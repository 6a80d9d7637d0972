"""Paths, ids and trigger patterns: what is accepted, and the error for what is not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncefire.errors import InvalidPathError, InvalidPatternError, OncefireError
from oncefire.model.paths import (
    MAX_ID_BYTES,
    Pattern,
    check_id,
    collection_path,
    document_path,
    parent_of,
)


@pytest.mark.parametrize("good", ["o1", "a b", "ünïcode", "x" * MAX_ID_BYTES, "..."])
def test_valid_ids_are_accepted(good: str) -> None:
    assert check_id(good) == good


@pytest.mark.parametrize(
    ("bad", "hint"),
    [
        ("", "non-empty"),
        ("a/b", "slash"),
        (".", "reserved"),
        ("..", "reserved"),
        ("x" * (MAX_ID_BYTES + 1), "1500 bytes"),
        ("é" * (MAX_ID_BYTES // 2 + 1), "1500 bytes"),  # 2 bytes a character in UTF-8
    ],
)
def test_bad_ids_raise_invalid_path_error_saying_why(bad: str, hint: str) -> None:
    with pytest.raises(InvalidPathError, match=hint) as info:
        check_id(bad, "document id")
    assert isinstance(info.value, OncefireError)
    assert str(info.value).endswith(".")


def test_a_non_string_id_is_refused() -> None:
    with pytest.raises(InvalidPathError):
        check_id(5)  # type: ignore[arg-type]


def test_document_and_collection_paths_are_normalised() -> None:
    assert document_path("/orders/o1/") == "orders/o1"
    assert document_path("orders/o1/items/i1") == "orders/o1/items/i1"
    assert collection_path("orders") == "orders"
    assert collection_path("orders/o1/items") == "orders/o1/items"
    assert parent_of("orders/o1/items/i1") == "orders/o1/items"


@pytest.mark.parametrize("bad", ["orders", "orders/o1/items", "a/b/c"])
def test_a_document_path_of_odd_depth_is_refused(bad: str) -> None:
    with pytest.raises(InvalidPathError, match="names a collection"):
        document_path(bad)


@pytest.mark.parametrize("bad", ["orders/o1", "a/b/c/d"])
def test_a_collection_path_of_even_depth_is_refused(bad: str) -> None:
    with pytest.raises(InvalidPathError, match="names a document"):
        collection_path(bad)


@pytest.mark.parametrize("bad", ["", "/", "orders//o1", "orders/../o1", "orders/./o1"])
def test_paths_with_empty_or_dot_segments_are_refused(bad: str) -> None:
    with pytest.raises(InvalidPathError):
        document_path(bad)


def test_pattern_matches_and_extracts_params() -> None:
    pattern = Pattern.parse("orders/{orderId}/items/{itemId}")
    assert pattern.match("orders/o1/items/i9") == {"orderId": "o1", "itemId": "i9"}
    assert pattern.match("orders/o1") is None
    assert pattern.match("carts/o1/items/i9") is None
    assert Pattern.parse("orders/o1").match("orders/o1") == {}
    assert Pattern.parse("{coll}/{doc}").match("users/u1") == {"coll": "users", "doc": "u1"}


@pytest.mark.parametrize(
    ("bad", "hint"),
    [
        ("orders/{}", "Bad wildcard"),
        ("orders/{1abc}", "Bad wildcard"),
        ("orders/{order-id}", "Bad wildcard"),
        ("orders/x{orderId}", "Bad wildcard"),
        ("orders/{orderId", "Bad wildcard"),
        ("orders/{a}{b}", "Bad wildcard"),
        ("orders/{id}/items/{id}", "same wildcard"),
        ("orders", "names a collection"),
        ("orders/{o}/items", "names a collection"),
        ("orders/../x", "reserved"),
        ("", "non-empty"),
    ],
)
def test_bad_patterns_raise_invalid_pattern_error(bad: str, hint: str) -> None:
    with pytest.raises(InvalidPatternError, match=hint) as info:
        Pattern.parse(bad)
    assert isinstance(info.value, OncefireError)


@pytest.mark.parametrize(
    ("pattern", "path", "params"),
    [
        ("logs/{rest=**}", "logs/a", {"rest": "a"}),
        ("logs/{rest=**}", "logs/a/b/c", {"rest": "a/b/c"}),
        ("users/{uid}/{doc=**}", "users/u1/posts/p1", {"uid": "u1", "doc": "posts/p1"}),
        ("{path=**}/likes/{likeId}", "posts/p1/likes/l1", {"path": "posts/p1", "likeId": "l1"}),
        ("{document=**}", "orders/o1/items/i1", {"document": "orders/o1/items/i1"}),
    ],
)
def test_a_multi_segment_wildcard_takes_one_or_more_segments(
    pattern: str, path: str, params: dict[str, str]
) -> None:
    assert Pattern.parse(pattern).match(path) == params


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("logs/{rest=**}", "logs"),  # at least one segment
        ("logs/{rest=**}", "other/a"),
        ("{path=**}/likes/{likeId}", "posts/p1/comments/c1"),
        ("{path=**}/likes/{likeId}", "likes/l1"),
    ],
)
def test_a_multi_segment_wildcard_does_not_match_other_paths(pattern: str, path: str) -> None:
    assert Pattern.parse(pattern).match(path) is None


@pytest.mark.parametrize(
    ("bad", "hint"),
    [
        ("orders/*", "'\\*' is not a wildcard here"),
        ("orders/**", "'\\*' is not a wildcard here"),
        ("orders/o*", "'\\*' is not a wildcard here"),
        ("{a=**}/x/{b=**}", "two multi-segment wildcards"),
        ("orders/{id=*}", "name it, like {orderId}"),
    ],
)
def test_star_segments_are_refused_with_a_sentence(bad: str, hint: str) -> None:
    with pytest.raises(InvalidPatternError, match=hint):
        Pattern.parse(bad)


@given(
    st.lists(st.sampled_from(["a", "b", "a.b", "{x}", "{y}", "{r=**}"]), min_size=1, max_size=5),
    st.lists(st.sampled_from(["a", "b", "a.b", "axb", ""]), min_size=0, max_size=7),
)
def test_a_patterns_regex_takes_exactly_the_paths_it_matches(
    segments: list[str], parts: list[str]
) -> None:
    try:
        pattern = Pattern.parse("/".join(segments), depth="any")
    except InvalidPatternError:
        return  # a wildcard named twice, or two {r=**}
    path = "/".join(parts)
    assert (pattern.regex().fullmatch(path) is not None) == (pattern.match(path) is not None)
