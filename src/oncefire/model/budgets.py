"""Budgets: `budget="5000/day"` (attempts a UTC hour or day), or a failure-rate trip, as the
function's options hold them; features/budget_guard.py enforces them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from oncefire.errors import ConfigError
from oncefire.retry import is_count, is_real

UNITS = {"hour": 3600.0, "day": 86400.0}
_BUDGET = re.compile(r"^\s*([0-9]+)\s*/\s*(hour|day)\s*$")
BUDGET_KEYS = ("invocations", "failure_rate", "min_attempts", "window")


@dataclass(frozen=True, slots=True)
class Budget:
    """At most `count` attempts a window of `seconds` (a UTC hour or day), and/or a failure-rate
    trip: more than `failure_rate` of the attempts of the last `window` seconds failed, once
    there are at least `min_attempts` of them."""

    count: int | None
    seconds: float
    text: str
    failure_rate: float | None = None
    min_attempts: int = 20
    window: float = 3600.0

    @classmethod
    def parse(cls, text: object) -> Budget:
        """A budget from "5000/day", "100/hour" or a dict with `invocations` (such a string),
        `failure_rate`, `min_attempts` and `window`; ConfigError otherwise."""
        if isinstance(text, dict):
            return cls._parse_dict(text)
        match = _BUDGET.match(text) if isinstance(text, str) else None
        if match is None or int(match.group(1)) < 1:
            raise ConfigError(
                f"budget={text!r} is not understood: write a count of at least 1 and a unit, "
                'such as budget="5000/day" or budget="100/hour".'
            )
        return cls(int(match.group(1)), UNITS[match.group(2)], match.group(0).strip())

    @classmethod
    def _parse_dict(cls, spec: dict[object, object]) -> Budget:
        unknown = set(spec) - set(BUDGET_KEYS)
        if unknown or not ({"invocations", "failure_rate"} & set(spec)):
            raise ConfigError(
                f"budget={spec!r} is not understood: a budget dict takes "
                f"{', '.join(BUDGET_KEYS)}, with invocations or failure_rate, such as "
                'budget={"invocations": "5000/day", "failure_rate": 0.5, "min_attempts": 100}.'
            )
        rate, least = spec.get("failure_rate"), spec.get("min_attempts", 20)
        window = spec.get("window", 3600.0)
        if rate is not None and not (isinstance(rate, int | float) and is_real(rate)):
            rate = -1.0  # refused below
        if rate is not None and not 0 < rate < 1:
            raise ConfigError(
                f"budget failure_rate={spec['failure_rate']!r} must be a fraction between 0 and "
                "1, such as 0.5."
            )
        if not isinstance(least, int) or not is_count(least) or least < 1:
            raise ConfigError(
                f"budget min_attempts={least!r} must be a whole number of at least 1."
            )
        if not isinstance(window, int | float) or not is_real(window) or window <= 0:
            raise ConfigError(f"budget window={window!r} must be a positive number of seconds.")
        base = cls.parse(spec["invocations"]) if "invocations" in spec else None
        parts = [base.text] if base else []
        if rate is not None:
            parts.append(f"failure_rate > {rate:g} of at least {least} attempts in {window:g} s")
        return cls(
            base.count if base else None,
            base.seconds if base else UNITS["day"],
            ", ".join(parts),
            None if rate is None else float(rate),
            least,
            float(window),
        )

    def window_start(self, now: float) -> float:
        """The start of the budget window that holds now."""
        return math.floor(now / self.seconds) * self.seconds
