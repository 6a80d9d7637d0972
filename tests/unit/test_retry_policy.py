"""RetryPolicy and the retry rules applied to one finished attempt."""

from __future__ import annotations

from typing import cast

import pytest

from oncefire import Retry, RetryPolicy
from oncefire.errors import ConfigError
from oncefire.retry import PAYLOAD_TOO_LARGE, Decision, Outcome, decide

NOW = 1_000.0


def test_default_policy_is_one_two_four_eight_sixteen_minutes_then_dead() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 6
    assert [policy.delay_after(n) for n in range(1, 6)] == [60, 120, 240, 480, 960]
    assert policy.window() == 60 + 120 + 240 + 480 + 960


def test_delays_are_capped_by_max_delay() -> None:
    policy = RetryPolicy(max_attempts=20, first_delay=60, multiplier=2, max_delay=300)
    assert [policy.delay_after(n) for n in range(1, 6)] == [60, 120, 240, 300, 300]


def test_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(jitter=0.1)
    delays = [policy.delay_after(1) for _ in range(200)]
    assert all(54 <= d <= 66 for d in delays)
    assert len(set(delays)) > 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"first_delay": -1},
        {"max_delay": -1},
        {"multiplier": 0.5},
        {"jitter": 1.5},
        {"jitter": -0.1},
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def _decide(
    outcome: Outcome,
    attempt: int = 1,
    *,
    is_retry_enabled: bool = True,
    requested_delay: float | None = None,
    is_oversized: bool = False,
) -> Decision:
    return decide(
        outcome,
        attempt=attempt,
        now=NOW,
        policy=RetryPolicy(),
        is_retry_enabled=is_retry_enabled,
        error="E",
        requested_delay=requested_delay,
        is_oversized=is_oversized,
    )


def test_success_succeeds() -> None:
    assert _decide(Outcome.SUCCEEDED).state == "succeeded"


def test_a_crashed_attempt_runs_again_at_once_until_the_last_attempt() -> None:
    for attempt in range(1, 6):
        decision = _decide(Outcome.CRASHED, attempt)
        assert decision.state == "pending"
        assert decision.run_at == NOW
    assert _decide(Outcome.CRASHED, 6).state == "dead"


@pytest.mark.parametrize("outcome", [Outcome.FAILED, Outcome.TIMEOUT])
def test_failures_retry_on_the_schedule_until_the_last_attempt(outcome: Outcome) -> None:
    for attempt, delay in zip(range(1, 6), [60, 120, 240, 480, 960], strict=True):
        decision = _decide(outcome, attempt)
        assert decision.state == "pending"
        assert decision.run_at == NOW + delay
    assert _decide(outcome, 6).state == "dead"


@pytest.mark.parametrize("outcome", [Outcome.PERMANENT, Outcome.EXPIRED])
def test_permanent_and_expired_go_to_the_dead_letter_queue_at_once(outcome: Outcome) -> None:
    decision = _decide(outcome, 1)
    assert decision.state == "dead"
    assert decision.error == "E"


def test_retry_disabled_makes_the_first_failure_dead() -> None:
    assert _decide(Outcome.FAILED, 1, is_retry_enabled=False).state == "dead"


def test_a_requested_delay_replaces_the_backoff_but_counts_against_the_policy() -> None:
    decision = _decide(Outcome.FAILED, 1, requested_delay=5.0)
    assert decision.run_at == NOW + 5
    assert _decide(Outcome.FAILED, 6, requested_delay=5.0).state == "dead"


@pytest.mark.parametrize("outcome", [Outcome.FAILED, Outcome.PERMANENT, Outcome.TIMEOUT])
def test_an_oversized_event_that_fails_is_dead_with_a_truncated_payload(outcome: Outcome) -> None:
    decision = _decide(outcome, 1, is_oversized=True)
    assert decision.state == "dead"
    assert decision.truncate
    assert cast(str, decision.error).startswith(PAYLOAD_TOO_LARGE)


def test_an_oversized_event_that_succeeds_succeeds() -> None:
    assert _decide(Outcome.SUCCEEDED, is_oversized=True).state == "succeeded"


def test_retry_refuses_a_negative_delay() -> None:
    with pytest.raises(ConfigError):
        Retry(delay=-1)
    assert Retry(delay=30).delay == 30
    assert "30" in str(Retry(delay=30))


def test_the_window_of_a_huge_policy_is_computed_at_once_without_overflow() -> None:
    # Past max_delay every wait is max_delay: 1 + 2 + ... + 32 min, then 1 h each.
    waits = [60.0, 120.0, 240.0, 480.0, 960.0, 1920.0]
    assert RetryPolicy(max_attempts=10**12).window() == sum(waits) + 3600.0 * (10**12 - 7)
    assert RetryPolicy(max_attempts=10**6, multiplier=1e300).window() == 60.0 + 3600.0 * (10**6 - 2)
    assert RetryPolicy(first_delay=0, max_attempts=10**12).window() == 0.0
    assert RetryPolicy(multiplier=1, max_attempts=4).window() == 180.0


def test_max_doublings_grows_linearly_after_the_doublings_as_cloud_tasks_does() -> None:
    # Cloud Tasks' example: min_backoff 10 s, max_backoff 300 s, max_doublings 3.
    policy = RetryPolicy(max_attempts=9, first_delay=10, max_delay=300, max_doublings=3)
    delays = [policy.delay_after(n) for n in range(1, 9)]
    assert delays == [10, 20, 40, 80, 160, 240, 300, 300]
    assert policy.window() == sum(delays)


def test_max_doublings_zero_grows_by_the_first_delay() -> None:
    policy = RetryPolicy(max_attempts=5, first_delay=5, max_delay=100, max_doublings=0)
    assert [policy.delay_after(n) for n in range(1, 5)] == [5, 10, 15, 20]


def test_huge_policies_have_a_finite_window_and_no_overflow() -> None:
    policy = RetryPolicy(max_attempts=2**62, first_delay=0.1, max_delay=3600, max_doublings=16)
    assert policy.delay_after(10**9) == 3600
    assert 3600 * (2**62 - 1) <= policy.window() < float("inf")
    assert RetryPolicy(max_attempts=5000, max_delay=1e300).delay_after(4000) == 1e300


@pytest.mark.parametrize("doublings", [-1, 1.5, True, "3"])
def test_bad_max_doublings_are_refused(doublings: object) -> None:
    with pytest.raises(ConfigError, match="max_doublings"):
        RetryPolicy(max_doublings=doublings)  # type: ignore[arg-type]


def test_max_delivery_attempts_keeps_the_rest_of_the_policy() -> None:
    from oncefire import App

    app = App("sqlite://:memory:")
    policy = RetryPolicy(first_delay=10, max_delay=300, max_doublings=3)

    @app.on_message("t", max_delivery_attempts=3, retry_policy=policy)
    def fn(event: object) -> None: ...

    assert app.triggers["fn"].options.retry_policy == RetryPolicy(
        max_attempts=3, first_delay=10, max_delay=300, max_doublings=3
    )
