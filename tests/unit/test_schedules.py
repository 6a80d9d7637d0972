"""Schedules: 'every N units' and 5-field cron strings, and their next tick (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from oncefire.errors import ConfigError
from oncefire.model.schedules import Schedule


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("spec", "seconds"),
    [
        ("every 5 minutes", 300),
        ("every 1 minute", 60),
        ("every 30 seconds", 30),
        ("every 2 hours", 7200),
        ("every 1 day", 86400),
        ("  Every 5 Minutes ", 300),
    ],
)
def test_intervals_parse_to_seconds(spec: str, seconds: float) -> None:
    assert Schedule.parse(spec).interval == seconds


def test_an_interval_ticks_on_its_multiples_strictly_after_now() -> None:
    schedule = Schedule.parse("every 5 minutes")
    assert schedule.next_after(at("2030-01-01T10:00:00")) == at("2030-01-01T10:05:00")
    assert schedule.next_after(at("2030-01-01T10:04:59")) == at("2030-01-01T10:05:00")


@pytest.mark.parametrize(
    ("spec", "now", "expected"),
    [
        ("*/5 * * * *", "2030-01-01T10:02:30", "2030-01-01T10:05:00"),
        ("*/5 * * * *", "2030-01-01T10:05:00", "2030-01-01T10:10:00"),
        ("0 9 * * *", "2030-01-01T09:00:00", "2030-01-02T09:00:00"),
        ("30 2 1 * *", "2030-01-15T00:00:00", "2030-02-01T02:30:00"),
        ("0 0 * * 0", "2030-01-01T00:00:00", "2030-01-06T00:00:00"),  # a Sunday
        ("0 12 * * 1-5", "2030-01-05T13:00:00", "2030-01-07T12:00:00"),  # Sat -> Mon
        ("15,45 * * * *", "2030-01-01T10:16:00", "2030-01-01T10:45:00"),
        ("0 0 29 2 *", "2030-01-01T00:00:00", "2032-02-29T00:00:00"),
        # day of month and weekday both given: either matches, as in every cron
        ("0 0 13 * 5", "2030-01-01T00:00:00", "2030-01-04T00:00:00"),  # Friday the 4th
        ("0 0 13 * 5", "2030-01-12T00:00:00", "2030-01-13T00:00:00"),  # the 13th, a Sunday
        # ...but a field starting with * counts as unrestricted (Vixie cron): both must match
        ("0 0 */10 * 1", "2030-01-01T00:00:00", "2030-01-21T00:00:00"),
    ],
)
def test_cron_next_tick(spec: str, now: str, expected: str) -> None:
    assert Schedule.parse(spec).next_after(at(now)) == at(expected)


@pytest.mark.parametrize(
    "bad",
    [
        "every 0 minutes",
        "every five minutes",
        "every 5 weeks",
        "* * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "* * * * 8",
        "0 0 30 2 *",
        "0 0 * * MOO",
        "*/0 * * * *",
        "5-1 * * * *",
        "a * * * *",
        "",
    ],
)
def test_bad_schedules_raise_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        Schedule.parse(bad)


def test_a_cron_that_never_fires_is_refused() -> None:
    with pytest.raises(ConfigError, match="never fires"):
        Schedule.parse("0 0 31 2 *").next_after(at("2030-01-01T00:00:00"))


@pytest.mark.parametrize(
    ("spec", "now", "expected"),
    [
        ("0 9 * * MON", "2030-01-01T00:00:00", "2030-01-07T09:00:00"),
        ("0 9 * * mon-fri", "2030-01-05T10:00:00", "2030-01-07T09:00:00"),
        ("0 0 1 JAN *", "2030-01-01T00:00:00", "2031-01-01T00:00:00"),
        ("0 0 * * 7", "2030-01-01T00:00:00", "2030-01-06T00:00:00"),  # 7 is Sunday too
        ("0 0 L * *", "2030-02-01T00:00:00", "2030-02-28T00:00:00"),  # last day of month
        ("0 0 * * 5#2", "2030-01-01T00:00:00", "2030-01-11T00:00:00"),  # second Friday
        ("0 0 * * 5L", "2030-01-01T00:00:00", "2030-01-25T00:00:00"),  # last Friday
    ],
)
def test_cron_names_seven_as_sunday_last_and_nth(spec: str, now: str, expected: str) -> None:
    assert Schedule.parse(spec).next_after(at(now)) == at(expected)


def test_a_timezone_places_the_cron_in_local_time_across_daylight_saving() -> None:
    schedule = Schedule.parse("0 9 * * *", timezone="America/New_York")
    # 9:00 in New York is 14:00 UTC in winter and 13:00 UTC after the March change.
    assert schedule.next_after(at("2030-03-09T12:00:00")) == at("2030-03-09T14:00:00")
    assert schedule.next_after(at("2030-03-09T15:00:00")) == at("2030-03-10T13:00:00")


def test_an_unknown_timezone_is_refused_with_a_sentence() -> None:
    with pytest.raises(ConfigError, match="Unknown time zone 'Mars/Olympus'"):
        Schedule.parse("0 9 * * *", timezone="Mars/Olympus")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("every 0 seconds", "'every 0 seconds' ticks more often than once a second"),
        ("every 0.5 seconds", "'every 0.5 seconds' ticks more often than once a second"),
        ("every 1.5 seconds", "'every 1.5 seconds' must be a whole number of seconds"),
    ],
)
def test_an_interval_under_a_second_is_refused_by_name(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        Schedule.parse(spec)
    assert "\n" not in str(caught.value)


def test_an_interval_may_be_a_fraction_of_a_larger_unit() -> None:
    assert Schedule.parse("every 1.5 minutes").interval == 90


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"catch_up": "first"}, "catch_up='first' is not a missed-tick policy"),
        ({"misfire_grace": 0.5}, "misfire_grace=0.5 is under 1 second"),
        ({"misfire_grace": -1}, "misfire_grace=-1 is under 1 second"),
        ({"misfire_grace": float("inf")}, "misfire_grace=inf must be a number of seconds"),
        ({"misfire_grace": "1h"}, "misfire_grace='1h' must be a number of seconds"),
        ({"misfire_grace": True}, "misfire_grace=True must be a number of seconds"),
    ],
)
def test_a_bad_missed_tick_policy_is_refused_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Schedule.parse("every 1 minute", **options)


def test_the_missed_tick_policy_of_an_interval() -> None:
    start = at("2030-01-01T10:00:00")  # the last tick handled; down until 10:05:20
    now = start + 320

    def fire(**options: Any) -> list[float]:
        return Schedule.parse("every 1 minute", **options).to_fire(start, now, now)

    assert fire() == [start + 300]
    assert fire(catch_up="all") == [start + 60 * n for n in range(1, 6)]
    assert fire(catch_up="all", misfire_grace=150) == [start + 180, start + 240, start + 300]
    assert fire(catch_up="none") == []
    assert fire(misfire_grace=20) == []  # the newest missed tick is 20 s late: out
    assert fire(misfire_grace=21) == [start + 300]


def test_on_time_one_tick_is_due_and_fires_whatever_the_policy() -> None:
    start = at("2030-01-01T10:00:00")
    for catch_up in ("latest", "all", "none"):
        schedule = Schedule.parse("every 1 minute", catch_up=catch_up, misfire_grace=1)
        assert schedule.to_fire(start, start + 60.5, start) == [start + 60]
        assert schedule.to_fire(start, start + 59.9, start) == []


def test_the_missed_tick_policy_of_a_cron_string_in_a_time_zone() -> None:
    week = 7 * 86400
    schedule = Schedule.parse(
        "0 9 * * *", timezone="Europe/Paris", catch_up="all", misfire_grace=week
    )
    # 09:00 in Paris is 08:00 UTC in winter; down from the 1st to the 4th at noon.
    after, now = at("2030-01-01T08:00:00"), at("2030-01-04T12:00:00")
    days = [at(f"2030-01-0{d}T08:00:00") for d in (2, 3, 4)]
    assert schedule.to_fire(after, now, now) == days
    assert schedule.last_until(now) == days[-1]
    assert schedule.last_until(days[-1]) == days[-1]
    latest = Schedule.parse("0 9 * * *", timezone="Europe/Paris", misfire_grace=86400)
    assert latest.to_fire(after, now, now) == [days[-1]]
    assert Schedule.parse("0 9 * * *", timezone="Europe/Paris").to_fire(after, now, now) == []
