"""Index keys sort as the values they key: type by type, then by value within a type."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from oncefire.model.index_keys import expired_ranges, index_key, rank

MOMENT = datetime(2026, 1, 1, tzinfo=UTC)

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False),
    st.integers(-(10**9), 10**9).map(lambda s: MOMENT + timedelta(seconds=s)),
    st.text(max_size=8),
    st.lists(st.integers(0, 3), max_size=3),
)


def sign(a: Any, b: Any) -> int:
    return cast(int, (a > b) - (a < b))


@given(values, values)
def test_keys_order_as_values_do(a: Any, b: Any) -> None:
    assert sign(index_key(a), index_key(b)) == sign(rank(a), rank(b))


def test_equal_numbers_share_a_key_and_types_do_not_mix() -> None:
    assert index_key(1) == index_key(1.0) == index_key(True + 0)
    assert index_key(0.0) == index_key(-0.0)
    assert index_key(True) != index_key(1)
    assert index_key(float("nan")) < index_key(float("-inf")) < index_key(-1) < index_key(0)
    assert index_key(10**400) == index_key(float("inf"))


def test_expired_ranges_hold_numbers_and_times_at_or_before_now() -> None:
    now = MOMENT.timestamp()
    (numbers_from, numbers_until), (times_from, times_until) = expired_ranges(now)
    assert numbers_from <= index_key(-1e300) <= index_key(now) <= numbers_until
    assert not index_key(now + 0.001) <= numbers_until
    assert times_from <= index_key(MOMENT) <= times_until
    assert not index_key(MOMENT + timedelta(microseconds=1)) <= times_until
    assert not times_from <= index_key("2026") <= times_until
