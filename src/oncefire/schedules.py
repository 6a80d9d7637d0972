"""Schedules: 'every N minutes' or a 5-field cron string, and their next tick."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from oncefire.errors import ConfigError

_EVERY = re.compile(r"^every\s+(\d+)\s+(second|minute|hour|day)s?$")
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _field(text: str, low: int, high: int, spec: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise ConfigError(f"Bad step in cron field {part!r} of {spec!r}.")
        if body == "*":
            first, last = low, high
        elif re.fullmatch(r"\d+-\d+", body):
            first, last = (int(x) for x in body.split("-"))
        elif body.isdigit():
            first = last = int(body)
            if step:
                last = high
        else:
            raise ConfigError(f"Bad cron field {part!r} in {spec!r}: use *, N, N-M, */S or lists.")
        if not low <= first <= last <= high:
            raise ConfigError(f"Cron field {part!r} of {spec!r} is outside {low}-{high}.")
        values.update(range(first, last + 1, step or 1))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a scheduled function runs: a fixed interval or a cron expression (UTC)."""

    spec: str
    interval: float | None
    cron: tuple[frozenset[int], ...] | None
    is_either_day: bool = False  # day of month and weekday both restricted: either one matches

    @classmethod
    def parse(cls, spec: str) -> Schedule:
        """Parse 'every 5 minutes' or 'M H DOM MON DOW'."""
        text = spec.strip().lower()
        match = _EVERY.match(text)
        if match:
            seconds = int(match.group(1)) * _UNIT[match.group(2)]
            if seconds <= 0:
                raise ConfigError(f"Schedule {spec!r} must have a positive interval.")
            return cls(spec, float(seconds), None)
        parts = text.split()
        if len(parts) != 5:
            raise ConfigError(
                f"Bad schedule {spec!r}: use 'every N minutes' (seconds, hours, days) or a "
                "5-field cron string like '*/5 * * * *'."
            )
        fields = tuple(_field(p, lo, hi, spec) for p, (lo, hi) in zip(parts, _RANGES, strict=True))
        is_either_day = not parts[2].startswith("*") and not parts[4].startswith("*")
        return cls(spec, None, fields, is_either_day)

    def next_after(self, now: float) -> float:
        """The first tick strictly after `now` (seconds since the epoch)."""
        if self.interval is not None:
            return (now // self.interval + 1) * self.interval
        assert self.cron is not None
        minutes, hours, days, months, weekdays = self.cron
        start = datetime.fromtimestamp(now, tz=UTC).replace(second=0, microsecond=0)
        start += timedelta(minutes=1)
        day = start.replace(hour=0, minute=0)
        # Day by day over eight years: a 29 February can be that far from the next one.
        for _ in range(366 * 8 + 1):
            in_month, on_weekday = day.day in days, (day.weekday() + 1) % 7 in weekdays
            is_day = (in_month or on_weekday) if self.is_either_day else in_month and on_weekday
            if is_day and day.month in months:
                for hour in sorted(hours):
                    for minute in sorted(minutes):
                        moment = day.replace(hour=hour, minute=minute)
                        if moment >= start:
                            return moment.timestamp()
            day += timedelta(days=1)
        raise ConfigError(f"Schedule {self.spec!r} never fires.")
