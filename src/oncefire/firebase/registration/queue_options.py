"""Cloud Tasks' queue settings as oncefire's options: a `RetryConfig` becomes a `RetryPolicy`
(waits from `min_backoff_seconds`, doubled `max_doublings` times, then growing by that step,
capped at `max_backoff_seconds`), a `RateLimits` becomes `max_instances` and `rate_limit`.
What a config leaves out takes Cloud Tasks' default as Firebase documents it."""

from __future__ import annotations

import logging
from typing import Any

from oncefire.errors import ConfigError
from oncefire.firebase.options import RateLimits, RetryConfig
from oncefire.firebase.params import resolve
from oncefire.retry import RetryPolicy, is_count, is_real

log = logging.getLogger(__name__)
DEFAULT_ATTEMPTS = 3
DEFAULT_MIN_BACKOFF = 0.1
DEFAULT_MAX_BACKOFF = 3600.0
DEFAULT_DOUBLINGS = 16
MOST_ATTEMPTS = 100_000  # max_retry_seconds never asks for more attempts than this


def _value(name: str, given: Any) -> Any:
    """An option's value (a param's `.value` when it is one)."""
    value = resolve(given)
    if value is not None and not is_real(value):
        raise ConfigError(f"{name}={given!r} must be a number.")
    return value


def retry_policy(config: RetryConfig | None) -> RetryPolicy:
    """The RetryPolicy of a RetryConfig, with Cloud Tasks' defaults for what it leaves out.

    Cloud Tasks stops retrying once the task was attempted max_attempts times *and*
    max_retry_seconds have passed since its first attempt: the policy's max_attempts is the
    first count that satisfies both (by the policy's own waits, not counting run times).
    """
    config = config if config is not None else RetryConfig()
    if not isinstance(config, RetryConfig):
        raise ConfigError(f"retry_config={config!r}: pass an options.RetryConfig(...).")
    attempts = _value("max_attempts", config.max_attempts)
    if attempts == -1:
        raise ConfigError(
            "RetryConfig(max_attempts=-1) asks for unlimited attempts; oncefire bounds every "
            "retry: give the number of attempts."
        )
    if attempts == 0:  # Cloud Tasks reads 0 as unset: the default applies
        log.info("RetryConfig(max_attempts=0) means the default, %d attempts", DEFAULT_ATTEMPTS)
    attempts = attempts or DEFAULT_ATTEMPTS
    low = _value("min_backoff_seconds", config.min_backoff_seconds)
    high = _value("max_backoff_seconds", config.max_backoff_seconds)
    doublings = _value("max_doublings", config.max_doublings)
    low = DEFAULT_MIN_BACKOFF if low is None else low
    high = DEFAULT_MAX_BACKOFF if high is None else high
    doublings = DEFAULT_DOUBLINGS if doublings is None else doublings
    if not is_count(attempts) or attempts < 1:
        raise ConfigError(f"RetryConfig(max_attempts={attempts!r}) must be a whole number, >= 1.")
    if low < 0 or high < low:
        raise ConfigError(
            f"RetryConfig(min_backoff_seconds={low!r}, max_backoff_seconds={high!r}): give "
            "0 <= min_backoff_seconds <= max_backoff_seconds."
        )
    policy = RetryPolicy(attempts, float(low), 2.0, float(high), 0.0, doublings)
    most_seconds = _value("max_retry_seconds", config.max_retry_seconds)
    if not most_seconds:
        return policy
    if most_seconds < 0:
        raise ConfigError(f"RetryConfig(max_retry_seconds={most_seconds!r}) must be >= 0.")
    elapsed, count = 0.0, 1  # seconds from the first attempt to attempt number `count`
    while count < attempts or elapsed < most_seconds:
        if count >= MOST_ATTEMPTS:
            raise ConfigError(
                f"RetryConfig(max_retry_seconds={most_seconds!r}) with waits of at most "
                f"{high:g} s asks for over {MOST_ATTEMPTS} attempts: lower it."
            )
        elapsed += policy.delay_after(count)
        count += 1
    return RetryPolicy(count, float(low), 2.0, float(high), 0.0, doublings)


def rate_options(limits: RateLimits | None, max_instances: Any) -> dict[str, Any]:
    """max_instances and rate_limit for a RateLimits (unset fields set nothing)."""
    if limits is None:
        return {}
    if not isinstance(limits, RateLimits):
        raise ConfigError(f"rate_limits={limits!r}: pass an options.RateLimits(...).")
    out: dict[str, Any] = {}
    most = resolve(limits.max_concurrent_dispatches)
    if most is not None:
        if not is_count(most) or most < 1:
            raise ConfigError(
                f"RateLimits(max_concurrent_dispatches={most!r}) must be a whole number, >= 1."
            )
        out["max_instances"] = most if max_instances is None else min(most, max_instances)
    rate = _value("max_dispatches_per_second", limits.max_dispatches_per_second)
    if rate is not None:
        if rate <= 0:
            raise ConfigError(f"RateLimits(max_dispatches_per_second={rate!r}) must be > 0.")
        out["rate_limit"] = f"{float(rate):.15g}/s"
    return out
