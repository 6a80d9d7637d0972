"""Schedules: 'every N minutes' or a cron string (parsed by cronsim), in a time zone, and the
missed-tick policy: which of the ticks found due at once a worker fires.

A worker normally finds one tick due, within a second of its time. It finds several after a
downtime (or a stall): `catch_up="latest"` (the default) fires the newest once, `"all"`
fires each, oldest first, and `"none"` skips those that came due before the worker knew the
schedule; a tick more than `misfire_grace` seconds late is skipped whatever the policy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from oncefire.errors import ConfigError

_EVERY = re.compile(r"^every\s+(\d+(?:\.\d+)?)\s+(second|minute|hour|day)s?$")
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
# Far enough to reach any date a cron string can name (29 February of a leap year).
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
CATCH_UP = ("latest", "all", "none")
DEFAULT_GRACE = 3600.0


def zone(name: str | None) -> ZoneInfo | None:
    """The ZoneInfo of an IANA time zone name (None stays None), or ConfigError."""
    if name is None:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"Unknown time zone {name!r}: use an IANA name such as 'Europe/Paris' or 'UTC'."
        ) from exc


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a scheduled function runs (a fixed interval, or a cron expression in a time zone)
    and what becomes of its missed ticks."""

    spec: str
    interval: float | None
    cron: str | None
    timezone: str | None = None  # IANA name; None is UTC
    catch_up: str = "latest"
    misfire_grace: float = DEFAULT_GRACE

    @classmethod
    def parse(
        cls,
        spec: str,
        *,
        timezone: str | None = None,
        catch_up: str = "latest",
        misfire_grace: float = DEFAULT_GRACE,
    ) -> Schedule:
        """Parse 'every 5 minutes' or a 5-field cron string ('0 9 * * MON-FRI', 'L', '#')."""
        text = spec.strip().lower() if isinstance(spec, str) else ""
        tz = zone(timezone)
        policy = _catch_up(catch_up), _grace(misfire_grace)
        match = _EVERY.match(text)
        if match:
            seconds = float(match.group(1)) * _UNIT[match.group(2)]
            if seconds < 1:
                raise ConfigError(
                    f"Schedule {spec!r} ticks more often than once a second: the shortest "
                    "interval is 'every 1 second'."
                )
            if not seconds.is_integer():
                raise ConfigError(f"Schedule {spec!r} must be a whole number of seconds.")
            return cls(spec, seconds, None, timezone, *policy)
        if len(text.split()) != 5:
            raise ConfigError(
                f"Bad schedule {spec!r}: use 'every N minutes' (seconds, hours, days) or a "
                "5-field cron string like '*/5 * * * *'."
            )
        cron = " ".join(text.upper().split())
        try:
            next(CronSim(cron, _EPOCH.astimezone(tz or UTC)))
        except (CronSimError, StopIteration) as exc:
            # cronsim refuses a day no month has ('31 2') as a bad day-of-month.
            why = str(exc).rstrip(".") or "it never fires"
            raise ConfigError(
                f"Bad cron schedule {spec!r}: {why} (a schedule that never fires is refused)."
            ) from exc
        return cls(spec, None, cron, timezone, *policy)

    def _local(self, seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, tz=zone(self.timezone) or UTC)

    def next_after(self, now: float) -> float:
        """The first tick strictly after `now` (seconds since the epoch)."""
        if self.interval is not None:
            return (now // self.interval + 1) * self.interval
        assert self.cron is not None
        try:
            return next(CronSim(self.cron, self._local(now))).timestamp()
        except StopIteration:
            raise ConfigError(f"Schedule {self.spec!r} never fires.") from None

    def last_until(self, now: float) -> float:
        """The last tick at or before `now`."""
        if self.interval is not None:
            return now // self.interval * self.interval
        assert self.cron is not None
        start = self._local(now) + timedelta(microseconds=1)  # cronsim's reverse is strict
        return next(CronSim(self.cron, start, reverse=True)).timestamp()

    def ticks_between(self, after: float, until: float) -> Iterator[float]:
        """The ticks strictly after `after` and at or before `until`, oldest first."""
        if self.interval is not None:
            tick = self.next_after(after)
            while tick <= until:
                yield tick
                tick += self.interval
            return
        assert self.cron is not None
        for moment in CronSim(self.cron, self._local(after)):
            tick = moment.timestamp()
            if tick > until:
                return
            yield tick

    def to_fire(self, after: float, now: float, known_since: float) -> list[float]:
        """Of the ticks due at `now` since the tick `after` (the last one handled), those the
        missed-tick policy fires, oldest first. known_since: when this worker learned of the
        schedule (catch_up "none" skips the ticks due before)."""
        lowest = max(after, now - self.misfire_grace)
        if self.catch_up == "none":
            lowest = max(lowest, known_since)
        if self.catch_up == "all":
            return list(self.ticks_between(lowest, now))
        newest = self.last_until(now)
        return [newest] if newest > lowest else []


def _catch_up(value: object) -> str:
    if value not in CATCH_UP:
        raise ConfigError(
            f"catch_up={value!r} is not a missed-tick policy: use 'latest' (the newest missed "
            "tick once), 'all' (each) or 'none'."
        )
    return str(value)


def _grace(value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"misfire_grace={value!r} must be a number of seconds.")
    if value < 1:
        raise ConfigError(
            f"misfire_grace={value!r} is under 1 second: a tick may be found up to a second "
            "late, so the grace must be at least 1."
        )
    return float(value)


@dataclass(slots=True)
class TickCursor:
    """Where one runtime stands in a schedule's ticks."""

    known_since: float  # when the runtime registered the schedule
    next_look: float  # when it looks for due ticks again
    last: float | None = None  # the last tick handled (fired or skipped); None: ask the store
