"""Schedules: 'every N minutes' or a cron string (parsed by cronsim), in a time zone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from oncefire.errors import ConfigError

_EVERY = re.compile(r"^every\s+(\d+)\s+(second|minute|hour|day)s?$")
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
# Far enough to reach any date a cron string can name (29 February of a leap year).
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


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
    """When a scheduled function runs: a fixed interval, or a cron expression in a time zone."""

    spec: str
    interval: float | None
    cron: str | None
    timezone: str | None = None  # IANA name; None is UTC

    @classmethod
    def parse(cls, spec: str, *, timezone: str | None = None) -> Schedule:
        """Parse 'every 5 minutes' or a 5-field cron string ('0 9 * * MON-FRI', 'L', '#')."""
        text = spec.strip().lower() if isinstance(spec, str) else ""
        tz = zone(timezone)
        match = _EVERY.match(text)
        if match:
            seconds = int(match.group(1)) * _UNIT[match.group(2)]
            if seconds <= 0:
                raise ConfigError(f"Schedule {spec!r} must have a positive interval.")
            return cls(spec, float(seconds), None, timezone)
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
        return cls(spec, None, cron, timezone)

    def next_after(self, now: float) -> float:
        """The first tick strictly after `now` (seconds since the epoch)."""
        if self.interval is not None:
            return (now // self.interval + 1) * self.interval
        assert self.cron is not None
        start = datetime.fromtimestamp(now, tz=zone(self.timezone) or UTC)
        try:
            return next(CronSim(self.cron, start)).timestamp()
        except StopIteration:
            raise ConfigError(f"Schedule {self.spec!r} never fires.") from None
