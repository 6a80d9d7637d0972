"""Scheduled functions with Firebase's names: `on_schedule(schedule="every day 00:00")`.

The schedule is a cron string or Cloud Scheduler's English-like form: `every N minutes` or
`hours`, `every day HH:MM`, `every monday HH:MM`. `timezone=` takes an IANA name (UTC when
none is given). Not retried unless `retry=True`, as in Firebase.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from oncefire.clock import to_datetime
from oncefire.errors import ConfigError
from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.options import Timezone  # zoneinfo.ZoneInfo, as Firebase's
from oncefire.firebase.registration.apps import default_app
from oncefire.firebase.registration.cloudevent import adapt

__all__ = ["ScheduledEvent", "Timezone", "on_schedule"]

F = TypeVar("F", bound=Callable[..., Any])
_AT = re.compile(r"^every\s+(day|[a-z]+day)\s+(\d{1,2}):(\d{2})$")
_EVERY = re.compile(r"^every\s+(\d+)\s+(mins?|minutes?|hours?)$")
_WEEKDAYS = {
    name: index
    for index, name in enumerate(
        ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
    )
}


@dataclass(frozen=True)
class ScheduledEvent:
    """What a scheduled function receives, as Firebase's `scheduler_fn.ScheduledEvent`."""

    job_name: str | None
    schedule_time: datetime


def to_oncefire_schedule(schedule: str) -> str:
    """An oncefire schedule for a cron string or Cloud Scheduler's English-like schedule."""
    text = " ".join(schedule.strip().lower().split())
    every = _EVERY.match(text)
    if every:
        unit = "hours" if every.group(2).startswith("hour") else "minutes"
        return f"every {every.group(1)} {unit}"
    at = _AT.match(text)
    if at:
        day, hour, minute = at.group(1), int(at.group(2)), int(at.group(3))
        if day != "day" and day not in _WEEKDAYS:
            raise ConfigError(f"Bad schedule {schedule!r}: {day!r} is not a day of the week.")
        weekday = "*" if day == "day" else str(_WEEKDAYS[day])
        return f"{minute} {hour} * * {weekday}"
    return schedule


def _convert(event: OncefireEvent) -> ScheduledEvent:
    due = event.raw.get("scheduled_time")
    when = to_datetime(float(due)) if isinstance(due, int | float) else event.time
    return ScheduledEvent(job_name=event.function, schedule_time=when)


def on_schedule(
    *, schedule: str, timezone: str | Timezone | None = None, **options: Any
) -> Callable[[F], F]:
    """Run the function on a schedule, in timezone (UTC when none is given)."""
    opts = firebase_options.event_options("scheduler_fn.on_schedule", options)
    spec = to_oncefire_schedule(schedule)
    app = default_app()

    def decorator(fn: F) -> F:
        zone = None if timezone is None else str(timezone)
        app.on_schedule(spec, timezone=zone, name=fn.__name__, **opts)(adapt(fn, _convert))
        return fn

    return decorator
