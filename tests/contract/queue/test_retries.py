"""Retry rules on a real store, with time moved only by TestClock.advance()."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from oncefire import App, PermanentError, Retry, RetryPolicy
from oncefire.events import Event
from oncefire.retry import PAYLOAD_TOO_LARGE
from oncefire.testing import TestClock

DEFAULT_DELAYS = [60, 120, 240, 480, 960]


class Recorder:
    """A function body that fails (or does what it is told) and records each call."""

    def __init__(self, clock: TestClock, raises: Callable[[int], BaseException | None]) -> None:
        self.clock = clock
        self.raises = raises
        self.calls: list[tuple[int, float, str]] = []

    def __call__(self, event: Event) -> None:
        self.calls.append((event.attempt, self.clock.now(), event.id))
        error = self.raises(event.attempt)
        if error is not None:
            raise error

    @property
    def attempts(self) -> list[int]:
        return [attempt for attempt, _, _ in self.calls]


def failing(app: App, clock: TestClock, **options: Any) -> Recorder:
    """Register `charge` on orders/{o}, failing with ValueError unless told otherwise."""
    raises = options.pop("raises", lambda n: ValueError(f"declined at attempt {n}"))
    recorder = Recorder(clock, raises)
    app.on_document_created("orders/{o}", name="charge", **options)(recorder)
    return recorder


def test_default_schedule_is_exact_to_the_millisecond(app: App, clock: TestClock) -> None:
    charge = failing(app, clock)
    app.db.document("orders/o1").set({"n": 1})
    start = clock.now()
    assert app.drain().attempts == 1
    failed_at = start
    for attempt, delay in enumerate(DEFAULT_DELAYS, start=2):
        clock.set(failed_at + delay - 0.001)
        assert app.drain().attempts == 0, f"attempt {attempt} ran a millisecond early"
        clock.set(failed_at + delay)
        assert app.drain().attempts == 1, f"attempt {attempt} did not run on time"
        assert charge.calls[-1][:2] == (attempt, failed_at + delay)
        failed_at += delay
    assert charge.attempts == [1, 2, 3, 4, 5, 6]
    event_id = charge.calls[0][2]
    assert app.store.delivery_states(event_id) == [("charge", "dead", 6)]
    clock.advance(10 * 86400)
    assert app.drain().attempts == 0  # a dead letter never runs again by itself
    [letter] = app.dead_letters.list()
    assert letter.attempts == 6
    assert (letter.error or "").startswith("ValueError: declined at attempt 6")
    outcomes = [a["outcome"] for a in app.store.attempts(event_id)]
    assert outcomes == ["failed"] * 6


def test_attempt_one_runs_at_once(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, raises=lambda n: None)
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    assert charge.calls[0][:2] == (1, clock.now())


def test_a_custom_policy_sets_attempts_and_delays(app: App, clock: TestClock) -> None:
    policy = RetryPolicy(max_attempts=3, first_delay=10, multiplier=3)
    charge = failing(app, clock, retry_policy=policy)
    app.db.document("orders/o1").set({"n": 1})
    start = clock.now()
    app.drain()
    clock.advance(10)
    app.drain()
    clock.advance(30)
    app.drain()
    clock.advance(3600)
    app.drain()
    assert [(n, at - start) for n, at, _ in charge.calls] == [(1, 0), (2, 10), (3, 40)]
    assert app.dead_letters.count("charge") == 1


def test_success_after_failures_stops_retrying(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, raises=lambda n: ValueError("flaky") if n < 3 else None)
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(60)
    app.drain()
    clock.advance(120)
    app.drain()
    clock.advance(86400)
    assert app.drain().attempts == 0
    assert charge.attempts == [1, 2, 3]
    assert app.store.delivery_states(charge.calls[0][2]) == [("charge", "succeeded", 3)]
    assert app.dead_letters.count() == 0


def test_retry_false_sends_the_first_failure_to_the_dead_letter_queue(
    app: App, clock: TestClock
) -> None:
    charge = failing(app, clock, retry=False)
    app.db.document("orders/o1").set({"n": 1})
    assert app.drain()["failed"] == 1
    clock.advance(86400)
    assert app.drain().attempts == 0
    assert charge.attempts == [1]
    [letter] = app.dead_letters.list()
    assert letter.attempts == 1
    assert (letter.error or "").startswith("ValueError")


def test_permanent_error_parks_the_delivery_at_once(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, raises=lambda n: PermanentError("card stolen"))
    app.db.document("orders/o1").set({"n": 1})
    assert app.drain()["permanent"] == 1
    clock.advance(86400)
    app.drain()
    assert charge.attempts == [1]
    [letter] = app.dead_letters.list()
    assert (letter.error or "").startswith("PermanentError: card stolen")
    assert [a["outcome"] for a in app.store.attempts(letter.event_id)] == ["permanent"]


class CardStolen(Exception):
    """A failure that retrying cannot fix."""


class NotMyFault(CardStolen):
    """A subclass counts too."""


def test_permanent_errors_lists_exception_types_never_retried(app: App, clock: TestClock) -> None:
    charge = failing(
        app,
        clock,
        permanent_errors=[CardStolen, KeyError],
        raises=lambda n: NotMyFault("stolen"),
    )
    app.db.document("orders/o1").set({"n": 1})
    assert app.drain()["permanent"] == 1
    clock.advance(86400)
    app.drain()
    assert charge.attempts == [1]
    assert app.dead_letters.count() == 1


def test_an_error_not_listed_as_permanent_is_retried(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, permanent_errors=(CardStolen,))
    app.db.document("orders/o1").set({"n": 1})
    assert app.drain()["failed"] == 1
    clock.advance(60)
    app.drain()
    assert charge.attempts == [1, 2]
    assert app.dead_letters.count() == 0


def test_retry_with_a_delay_schedules_the_next_attempt_then(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, raises=lambda n: Retry(delay=7.5) if n == 1 else None)
    app.db.document("orders/o1").set({"n": 1})
    start = clock.now()
    assert app.drain()["failed"] == 1
    clock.set(start + 7.499)
    assert app.drain().attempts == 0
    clock.set(start + 7.5)
    assert app.drain()["succeeded"] == 1
    assert [(n, at - start) for n, at, _ in charge.calls] == [(1, 0), (2, 7.5)]
    [first, _] = app.store.attempts(charge.calls[0][2])
    assert first["error"].startswith("Retry: retry requested in 7.5 s")


def test_retry_without_a_delay_uses_the_policy(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, raises=lambda n: Retry() if n == 1 else None)
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(59.9)
    assert app.drain().attempts == 0
    clock.advance(0.1)
    app.drain()
    assert charge.attempts == [1, 2]


def test_retry_requests_count_against_the_policy(app: App, clock: TestClock) -> None:
    charge = failing(
        app, clock, retry_policy=RetryPolicy(max_attempts=3), raises=lambda n: Retry(delay=1)
    )
    app.db.document("orders/o1").set({"n": 1})
    for _ in range(5):
        app.drain()
        clock.advance(1)
    assert charge.attempts == [1, 2, 3]
    assert app.dead_letters.count() == 1


def test_retry_is_ignored_when_retry_is_false(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, retry=False, raises=lambda n: Retry(delay=1))
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(10)
    app.drain()
    assert charge.attempts == [1]
    assert app.dead_letters.count() == 1


def test_an_attempt_older_than_max_event_age_expires_into_the_dead_letter_queue(
    app: App, clock: TestClock
) -> None:
    charge = failing(app, clock, max_event_age=120)
    app.db.document("orders/o1").set({"n": 1})
    app.drain()  # attempt 1 at age 0
    clock.advance(60)
    app.drain()  # attempt 2 at age 60
    clock.advance(120)
    assert app.drain()["expired"] == 1  # attempt 3 would start at age 180: it does not run
    assert charge.attempts == [1, 2]
    event_id = charge.calls[0][2]
    assert app.store.delivery_states(event_id) == [("charge", "dead", 3)]
    outcomes = [a["outcome"] for a in app.store.attempts(event_id)]
    assert outcomes == ["failed", "failed", "expired"]
    [letter] = app.dead_letters.list()
    assert "expired" in (letter.error or "")
    assert "max_event_age 120" in (letter.error or "")


def test_an_attempt_exactly_at_max_event_age_still_runs(app: App, clock: TestClock) -> None:
    charge = failing(app, clock, max_event_age=60)
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(60)
    app.drain()
    assert charge.attempts == [1, 2]


def test_a_delivery_that_waited_too_long_expires_without_running(
    app: App, clock: TestClock
) -> None:
    charge = failing(app, clock, max_event_age=10, raises=lambda n: None)
    app.db.document("orders/o1").set({"n": 1})
    clock.advance(11)
    assert app.drain()["expired"] == 1
    assert charge.calls == []
    assert app.dead_letters.count() == 1


def test_a_replayed_expired_dead_letter_gets_a_fresh_age_allowance(
    app: App, clock: TestClock
) -> None:
    charge = failing(app, clock, max_event_age=10, raises=lambda n: None)
    app.db.document("orders/o1").set({"n": 1})
    clock.advance(11)
    assert app.drain()["expired"] == 1
    [letter] = app.dead_letters.list()
    clock.advance(1000)
    app.dead_letters.replay(letter.id)
    clock.advance(10)  # within the allowance counted from the replay
    assert app.drain()["succeeded"] == 1
    assert charge.attempts == [1]
    assert app.store.delivery_states(letter.event_id) == [("charge", "succeeded", 1)]


def test_a_replayed_dead_letter_expires_again_once_its_new_allowance_is_spent(
    app: App, clock: TestClock
) -> None:
    charge = failing(app, clock, max_event_age=10, raises=lambda n: None)
    app.db.document("orders/o1").set({"n": 1})
    clock.advance(11)
    app.drain()
    [letter] = app.dead_letters.list()
    app.dead_letters.replay(letter.id)
    clock.advance(11)
    assert app.drain()["expired"] == 1
    assert charge.calls == []


@pytest.fixture
def small_app(make_app: Callable[..., App]) -> App:
    """An app whose retry queue takes payloads up to 1,000 bytes."""
    return make_app(max_payload_bytes=1000)


def test_an_oversized_event_gets_one_attempt_then_a_dead_letter_shown_truncated(
    small_app: App, clock: TestClock
) -> None:
    charge = failing(small_app, clock)
    big = "x" * 5000
    small_app.db.document("orders/o1").set({"blob": big})
    assert small_app.drain()["failed"] == 1
    clock.advance(86400)
    assert small_app.drain().attempts == 0
    assert charge.attempts == [1]
    [letter] = small_app.dead_letters.list()
    assert letter.truncated
    assert (letter.error or "").startswith(PAYLOAD_TOO_LARGE)
    assert "ValueError" in (letter.error or "")
    assert big not in str(letter.payload)
    assert len(letter.payload["truncated"]) <= 1024
    assert letter.payload["size"] > 5000
    # The truncation is for display: the store keeps the full payload, so a replay works.
    assert small_app.dead_letters.get(letter.id, full=True).payload["after"]["data"]["blob"] == big
    small_app.dead_letters.replay(letter.id)
    assert small_app.dead_letters.count() == 0


def test_an_oversized_event_that_fails_permanently_is_truncated_too(
    small_app: App, clock: TestClock
) -> None:
    failing(small_app, clock, raises=lambda n: PermanentError("no"))
    small_app.db.document("orders/o1").set({"blob": "x" * 5000})
    small_app.drain()
    [letter] = small_app.dead_letters.list()
    assert letter.truncated
    assert "x" * 2000 not in str(letter.payload)


def test_an_oversized_event_that_succeeds_is_fine(small_app: App, clock: TestClock) -> None:
    charge = failing(small_app, clock, raises=lambda n: None)
    small_app.db.document("orders/o1").set({"blob": "x" * 5000})
    assert small_app.drain()["succeeded"] == 1
    assert charge.attempts == [1]


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-limit", "one-byte-over"])
def test_an_event_at_the_payload_limit_is_retried_and_one_byte_over_is_not(
    make_app: Callable[..., App], clock: TestClock, tmp_path: Path, over: int
) -> None:
    probe = App(f"sqlite:///{tmp_path}/probe.db", clock=clock)  # the event's exact size
    sizes: list[int] = []
    probe.on_document_created("orders/{o}", name="charge")(lambda event: sizes.append(event.size))
    probe.db.document("orders/o1").set({"blob": "x" * 5000})
    probe.drain()
    probe.close()
    app = make_app(max_payload_bytes=sizes[0] - over)
    charge = failing(app, clock)
    app.db.document("orders/o1").set({"blob": "x" * 5000})
    app.drain()
    clock.advance(60)
    app.drain()
    if over:
        assert charge.attempts == [1]
        [dead] = app.dead_letters.list()
        assert "payload too large for retry queue" in (dead.error or "")
    else:
        assert charge.attempts == [1, 2]
        assert app.dead_letters.count() == 0
