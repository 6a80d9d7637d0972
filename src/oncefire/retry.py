"""The retry rules: given how an attempt ended, what happens to its delivery next."""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass
from enum import StrEnum

from oncefire.errors import ConfigError

PAYLOAD_TOO_LARGE = "payload too large for retry queue"


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
    """Bounded exponential backoff: attempt 1 at once, then first_delay * multiplier**(n-1)."""

    max_attempts: int = 6
    first_delay: float = 60.0
    multiplier: float = 2.0
    max_delay: float = 3600.0
    jitter: float = 0.0

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

    def delay_after(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (counting from 1)."""
        delay = min(self.first_delay * self.multiplier ** (attempt - 1), self.max_delay)
        if self.jitter:
            delay *= 1 + random.uniform(-self.jitter, self.jitter)
        return max(delay, 0.0)

    def window(self) -> float:
        """Longest time from the first attempt to the last (with jitter, without timeouts)."""
        total, delay = 0.0, self.first_delay
        for n in range(1, self.max_attempts):
            if delay >= self.max_delay or delay == 0 or self.multiplier == 1:
                # Every later wait is this one: no loop over a huge max_attempts, no overflow.
                total += min(delay, self.max_delay) * (self.max_attempts - n)
                break
            total += delay
            delay *= self.multiplier
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
