"""A query through a declared index returns what the in-Python semantics do, for values of
every type: the same documents, in the same order, cut at the same limit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncefire import App
from oncefire.model.index_keys import rank
from oncefire.query import _MISSING, Query, _compare

MOMENT = datetime(2026, 1, 1, tzinfo=UTC)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([-1.5, 0.25, 2.0, -1e300, 1e300]),
    st.integers(-3, 3).map(lambda s: MOMENT + timedelta(seconds=s)),
    st.sampled_from(["", "a", "b", "ab", "é", "z"]),
    st.lists(st.integers(0, 2), max_size=2),
)
MISSING = object()


@pytest.fixture
def docs(app: App) -> dict[str, Any]:
    """40 documents whose v holds values of every type (or is missing)."""
    pool: list[Any] = [None, False, True, -2, 0, 1, 1.0, 2.0, 0.25, 5, -1e300, 1e300]
    pool += [MOMENT + timedelta(seconds=s) for s in (-1, 0, 2)]
    pool += ["", "a", "ab", "b", "é", [0], [0, 1], [], MISSING]
    picks = random.Random(12).choices(pool, k=40)
    found = dict(enumerate(picks))
    app.db.collection("items").index("v")
    docs = {}
    for n, value in found.items():
        doc = {"w": n % 3} if value is MISSING else {"v": value, "w": n % 3}
        docs[f"i{n:02d}"] = doc
        app.db.document(f"items/i{n:02d}").set(doc)
    return docs


def expected(
    docs: dict[str, Any], filters: list[tuple[str, str, Any]], is_desc: bool | None, count: int
) -> list[str]:
    """The query's answer computed in Python from the documents as written."""
    ids = [
        i
        for i, d in sorted(docs.items())
        if all(_compare(op, d.get(f, _MISSING), v) for f, op, v in filters)  # as Query does
    ]
    if is_desc is not None:
        ids = sorted((i for i in ids if "v" in docs[i]), reverse=is_desc)
        ids.sort(key=lambda i: rank(docs[i]["v"]), reverse=is_desc)
    return ids[:count]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    op=st.sampled_from(["==", "!=", "<", "<=", ">", ">=", None]),
    value=scalars,
    is_desc=st.sampled_from([None, False, True]),
    count=st.integers(1, 12),
    w=st.sampled_from([None, 0, 1]),
)
def test_an_indexed_query_equals_the_python_semantics(
    app: App,
    docs: dict[str, Any],
    op: str | None,
    value: Any,
    is_desc: bool | None,
    count: int,
    w: int | None,
) -> None:
    filters = [] if op is None else [("v", op, value)]
    if w is not None:
        filters.append(("w", "==", w))
    query: Query = app.db.collection("items")
    for field, f_op, f_value in filters:
        query = query.where(field, f_op, f_value)
    if is_desc is not None:
        query = query.order_by("v", "DESCENDING" if is_desc else "ASCENDING")
    found = [s.id for s in query.limit(count).get()]
    assert found == expected(docs, filters, is_desc, count)


def test_a_float_beyond_2_53_is_found_by_equality_on_both_stores(app: App) -> None:
    """PostgreSQL's jsonb gives back -1e300 as an integer of 301 digits: it still equals the
    float it was written as, as its index key does."""
    app.db.collection("items").index("v")
    app.db.document("items/big").set({"v": -1e300})
    app.db.document("items/small").set({"v": -1.0})
    found = app.db.collection("items").where("v", "==", -1e300).get()
    assert [s.id for s in found] == ["big"]
    found = app.db.collection("items").where("v", "<=", -1e300).order_by("v").get()
    assert [s.id for s in found] == ["big"]
