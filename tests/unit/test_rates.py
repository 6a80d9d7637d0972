"""Rate limits as pure rules: what a rate parses to, and how its bucket refills on a TestClock."""

from __future__ import annotations

import pytest

from oncefire.model.rates import RateLimit, available, refill, waited
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


def test_a_delivery_due_before_its_token_came_waited_for_the_rate_limit() -> None:
    rate = RateLimit.parse("1/m")  # a token every 60 s, a burst of one
    # The bucket was emptied at 100: its next token came at 160, the one after at 220.
    assert waited(rate, 0.0, 100.0, [90.0]) == 1
    assert waited(rate, 0.0, 100.0, [159.0]) == 1
    assert waited(rate, 0.0, 100.0, [160.0]) == 0  # due when its token came: no wait
    assert waited(rate, 0.0, 100.0, [90.0, 200.0]) == 2  # the second spends the 220 token
    assert waited(rate, 0.0, 100.0, [90.0, 230.0]) == 1


def test_a_delivery_that_found_a_token_waiting_did_not_wait() -> None:
    rate = RateLimit.parse("60/m")  # a burst of six
    assert waited(rate, 6.0, 100.0, [50.0] * 6) == 0  # six tokens were there at 100
    assert waited(rate, 6.0, 100.0, [50.0] * 7) == 1  # the seventh came at 101
    assert waited(rate, 0.5, 100.0, [100.2]) == 1  # half a token then: a whole one at 100.5
