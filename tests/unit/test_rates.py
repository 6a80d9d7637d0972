"""Rate limits as pure rules: what a rate parses to, and how its bucket refills on a TestClock."""

from __future__ import annotations

import pytest

from oncefire.rates import RateLimit, available, refill
from oncefire.testing import TestClock


@pytest.mark.parametrize("text", ["3600/h", "60/m", "1/s", " 3600 / h "])
def test_one_start_a_second_written_per_hour_minute_or_second(text: str) -> None:
    assert RateLimit.parse(text).per_second == 1.0


def test_an_hourly_rate_keeps_its_hour_and_a_tenth_of_it_as_burst() -> None:
    rate = RateLimit.parse("3600/h")
    assert (rate.count, rate.per, rate.burst) == (3600.0, 3600.0, 360.0)


def test_an_empty_hourly_bucket_releases_one_token_a_second() -> None:
    rate = RateLimit.parse("3600/h")
    clock = TestClock()
    tokens, refilled_at = 0.0, clock.now()  # every token just spent
    released = []
    for _ in range(10):  # half-second steps: a whole token every second step
        clock.advance(0.5)
        tokens = refill(rate, tokens, refilled_at, clock.now())
        refilled_at = clock.now()
        released.append(available(tokens))
        tokens -= available(tokens)  # each whole token starts one delivery
    assert released == [0, 1] * 5
