"""The retry rules: given how an attempt ended, what happens to its delivery next."""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass
from enum import StrEnum

from oncefire.errors import ConfigError

PAYLOAD_TOO_LARGE = "payload too large for retry queue"
_MOST_SUMMED = 10_000  # waits window() adds one by one before it bounds the rest by the cap


class Outcome(StrEnum):
    """How one attempt ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    EXPIRED = "expired"
    PERMANENT = "permanent"


def is_real(value: object) -> bool:
    """Whether value is a finite int or float (not a bool, NaN, infinity, or an int past the
    largest float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    return abs(value) <= sys.float_info.max


def is_count(value: object) -> bool:
    """Whether value is a whole number (an int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff: attempt 1 at once, then first_delay * multiplier**(n-1).

    With max_doublings=d the wait grows that way d times, then by the same step each time
    (Cloud Tasks' rule): first_delay=10, max_doublings=3 waits 10, 20, 40, 80, 160, 240, ...
    """

    max_attempts: int = 6
    first_delay: float = 60.0
    multiplier: float = 2.0
    max_delay: float = 3600.0
    jitter: float = 0.0
    max_doublings: int | None = None

    def __post_init__(self) -> None:
        if not is_count(self.max_attempts):
            raise ConfigError(
                f"RetryPolicy.max_attempts={self.max_attempts!r} must be a whole number."
            )
        for name in ("first_delay", "multiplier", "max_delay", "jitter"):
            if not is_real(getattr(self, name)):
                raise ConfigError(
                    f"RetryPolicy.{name}={getattr(self, name)!r} must be a finite number."
                )
        if self.max_attempts < 1:
            raise ConfigError("RetryPolicy.max_attempts must be at least 1.")
        if self.first_delay < 0 or self.max_delay < 0:
            raise ConfigError("RetryPolicy delays must not be negative.")
        if self.multiplier < 1:
            raise ConfigError("RetryPolicy.multiplier must be at least 1.")
        if not 0 <= self.jitter <= 1:
            raise ConfigError("RetryPolicy.jitter is a fraction between 0 and 1.")
        if self.max_doublings is not None and (
            not is_count(self.max_doublings) or self.max_doublings < 0
        ):
            raise ConfigError(
                f"RetryPolicy.max_doublings={self.max_doublings!r} must be a whole number of at "
                "least 0, or None."
            )

    def delay_after(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (counting from 1)."""
        delay = min(self._growth(attempt - 1), self.max_delay)
        if self.jitter:
            delay *= 1 + random.uniform(-self.jitter, self.jitter)
        return max(delay, 0.0)

    def _growth(self, retries: int) -> float:
        """The wait before retry number retries + 1, before the cap."""
        doublings = self.max_doublings
        exponent = retries if doublings is None else min(retries, doublings)
        try:
            wait = self.first_delay * self.multiplier**exponent
        except OverflowError:
            return math.inf
        if doublings is None or retries <= doublings:
            return wait
        return wait * (retries - doublings + 1)

    def window(self) -> float:
        """Longest time from the first attempt to the last (with jitter, without timeouts)."""
        total = 0.0
        for n in range(1, self.max_attempts):
            delay = self._growth(n - 1)
            if delay >= self.max_delay or delay == 0 or n > _MOST_SUMMED:
                # Every later wait is the cap (or nothing; past _MOST_SUMMED, the cap bounds
                # them): no loop over a huge max_attempts.
                total += (self.max_delay if delay else 0.0) * (self.max_attempts - n)
                break
            if self.multiplier == 1 and self.max_doublings is None:
                total += delay * (self.max_attempts - n)
                break
            total += delay
        return total * (1 + self.jitter)


@dataclass(frozen=True, slots=True)
class Decision:
    """The next state of a delivery: succeeded, pending again at run_at, or dead."""

    state: str
    run_at: float | None = None
    error: str | None = None
    truncate: bool = False


def decide(
    outcome: Outcome,
    *,
    attempt: int,
    now: float,
    policy: RetryPolicy,
    is_retry_enabled: bool,
    error: str | None = None,
    requested_delay: float | None = None,
    is_oversized: bool = False,
) -> Decision:
    """Apply the retry rules to one finished attempt."""
    if outcome is Outcome.SUCCEEDED:
        return Decision("succeeded")
    if is_oversized:  # whatever the failure, the full payload is not kept
        return Decision("dead", error=f"{PAYLOAD_TOO_LARGE}: {error}", truncate=True)
    if outcome in (Outcome.PERMANENT, Outcome.EXPIRED):
        return Decision("dead", error=error)
    if not is_retry_enabled or attempt >= policy.max_attempts:
        return Decision("dead", error=error)
    if outcome is Outcome.CRASHED:
        # The lease that ran out was the wait: a dead worker's delivery runs again at once
        # (within lease + sweep of the crash), still counted against the policy.
        return Decision("pending", run_at=now, error=error)
    # Retry(delay=nan) or an infinite delay would make a run_at no store can hold.
    delay = policy.delay_after(attempt)
    if requested_delay is not None and is_real(requested_delay) and requested_delay >= 0:
        delay = requested_delay
    return Decision("pending", run_at=now + delay, error=error)
