"""Rate limits: how many deliveries of a function may start per second, minute or hour, across
every worker. The store keeps one token bucket per function; these pure rules fill and read it.

A bucket holds at most a tenth of the limit (at least one token) and refills continuously, so
over any span of T seconds a function starts at most `count * T / per` deliveries plus that
burst: "100/s" starts at most 1,010 in 10 s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from oncefire.errors import ConfigError

_PER = {"s": 1.0, "m": 60.0, "h": 3600.0}
_FORM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([smh])\s*$")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `count` deliveries started per `per` seconds, across all workers."""

    count: float
    per: float

    @classmethod
    def parse(cls, text: object) -> RateLimit:
        """A RateLimit from "100/s", "30/m" or "500/h"."""
        match = _FORM.match(text) if isinstance(text, str) else None
        if match is None or float(match.group(1)) <= 0:
            raise ConfigError(
                f"rate_limit={text!r} is not a rate: write a positive number of starts per "
                'second, minute or hour, such as "100/s", "30/m" or "500/h".'
            )
        return cls(float(match.group(1)), _PER[match.group(2)])

    @property
    def per_second(self) -> float:
        """Tokens added to the bucket each second."""
        return self.count / self.per

    @property
    def burst(self) -> float:
        """The most tokens a bucket holds: a tenth of the limit, at least one."""
        return max(1.0, self.count / 10)


def refill(limit: RateLimit, tokens: float, refilled_at: float, now: float) -> float:
    """The tokens in a bucket at `now`. A clock behind the last refill (another machine's)
    adds nothing rather than taking away."""
    elapsed = max(0.0, now - refilled_at)
    return min(limit.burst, tokens + elapsed * limit.per_second)


# Times are floats of about 1.8e9 s, good to ~0.2 us: a bucket refilled to one token can read
# 0.99999. A thousandth of a token is far above that error and far below a start.
ROUNDING = 1e-3


def available(tokens: float) -> int:
    """How many deliveries the tokens let start now."""
    return max(0, math.floor(tokens + ROUNDING))


def seconds_until_token(limit: RateLimit, tokens: float) -> float:
    """How long until a bucket holding `tokens` (as of now) holds one whole token."""
    return max(0.0, (1.0 - tokens) / limit.per_second)


def idle_wait(poll: float, rates: Mapping[str, RateLimit], tokens: Mapping[str, float]) -> float:
    """How long an idle worker waits for new work: the poll interval, or less when an empty
    bucket gets its next token sooner (so a rate-limited function neither spins nor lags)."""
    waits = [
        seconds_until_token(rate, tokens[n])
        for n, rate in rates.items()
        if not available(tokens[n])
    ]
    return min([poll, *waits])


def waited(limit: RateLimit, tokens: float, refilled_at: float, run_ats: Iterable[float]) -> int:
    """How many of the deliveries a lease takes had to wait for the rate limit. The bucket held
    `tokens` when it was last spent from (`refilled_at`) and has only refilled since, so the
    i-th token this lease spends came (i - tokens) / rate seconds after; the earliest due
    delivery spends the first, and one due before its token came waited for it."""
    count = 0
    for i, run_at in enumerate(sorted(run_ats), start=1):
        short = i - ROUNDING - tokens  # what the bucket lacked of its i-th token then
        if short > 0 and run_at < refilled_at + short / limit.per_second:
            count += 1
    return count
