"""Task queue functions with Firebase's names: `@tasks_fn.on_task_dispatched(retry_config=...,
rate_limits=...)`, fed by `functions.task_queue(name).enqueue(data, TaskOptions(...))`.

A task is a message on the topic `firebase.tasks.<function>` whose delivery runs at its
schedule time; the function receives a `CallableRequest` whose `data` is the "data" of the
body enqueued (a body of another shape is a dead letter at once: Firebase answers it 400).
Cloud Tasks' rules map onto oncefire's: `RetryConfig` is the function's `RetryPolicy` (waits
from `min_backoff_seconds`, doubled `max_doublings` times, then growing linearly, capped at
`max_backoff_seconds`); `max_concurrent_dispatches` is `max_instances`,
`max_dispatches_per_second` its `rate_limit`; an exhausted task is a dead letter.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from oncefire.errors import ConfigError, OncefireError, PermanentError
from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.defaults import current_app, default_app
from oncefire.firebase.options import RateLimits, RetryConfig
from oncefire.retry import RetryPolicy, is_count, is_real

__all__ = ["CallableRequest", "RateLimits", "RetryConfig", "on_task_dispatched"]

log = logging.getLogger(__name__)
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
TOPIC_PREFIX = "firebase.tasks."
ALLOWED = frozenset({"timeout_sec", "max_instances"})
# Cloud Tasks' defaults for a Firebase task queue, as Firebase documents them.
DEFAULT_ATTEMPTS = 3
DEFAULT_MIN_BACKOFF = 0.1
DEFAULT_MAX_BACKOFF = 3600.0
DEFAULT_DOUBLINGS = 16
MOST_ATTEMPTS = 100_000  # max_retry_seconds never asks for more attempts than this


def topic_of(function: str) -> str:
    """The topic whose messages are the tasks of a task queue function."""
    return TOPIC_PREFIX + function


class DispatchDeadlineExceeded(OncefireError):
    """An attempt ran past its task's dispatch_deadline_seconds: Cloud Tasks counts it as
    failed (DEADLINE_EXCEEDED) and retries the task, whatever the function returned."""


@dataclass(frozen=True)
class CallableRequest(Generic[T]):
    """What a task queue function receives: the task's data and the request that carried it."""

    data: T
    raw_request: Any = None  # a flask.Request with Cloud Tasks' headers, when Flask is installed
    app: Any = None
    auth: Any = None
    instance_id_token: str | None = None


def _value(name: str, given: Any) -> Any:
    """An option's value (a param's `.value` when it is one)."""
    value = getattr(given, "value", given)
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
    most = getattr(limits.max_concurrent_dispatches, "value", limits.max_concurrent_dispatches)
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


def _request(event: OncefireEvent) -> CallableRequest[Any]:
    """The CallableRequest of a task's delivery: its body must be `{"data": ...}`, as the
    callable protocol Firebase's task functions speak requires."""
    message = event.data
    request = message.data if isinstance(message.data, dict) else {}
    body = request.get("body")
    if not isinstance(body, dict) or list(body) != ["data"]:
        raise PermanentError(
            f"Bad Request: the body of task {message.attributes.get('task_id', event.id)} is "
            f"{body!r}, not {{'data': ...}}: enqueue {{'data': ...}}, which firebase_admin "
            "sends as the request's body."
        )
    return CallableRequest(data=body["data"], raw_request=_raw_request(event, request))


def _raw_request(event: OncefireEvent, request: dict[str, Any]) -> Any:
    """The request Cloud Tasks would send for this attempt (a flask.Request with its
    X-CloudTasks-* headers), or None when Flask is not installed."""
    try:
        from flask import Request
        from werkzeug.test import EnvironBuilder
    except ImportError:
        return None
    attributes = event.data.attributes
    headers = {
        **(request.get("headers") or {}),
        "Content-Type": "application/json",
        "X-CloudTasks-QueueName": event.function,
        "X-CloudTasks-TaskName": attributes.get("task_id", event.id),
        "X-CloudTasks-TaskRetryCount": str(event.attempt - 1),
        "X-CloudTasks-TaskExecutionCount": str(event.attempt - 1),
        "X-CloudTasks-TaskETA": attributes.get("eta", ""),
    }
    sent = json.dumps(request["body"])
    builder = EnvironBuilder(path=f"/{event.function}", method="POST", headers=headers, data=sent)
    try:
        return Request(builder.get_environ())
    finally:
        builder.close()


def _runner(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn as a message function: called with the CallableRequest, then held to its task's
    dispatch deadline (measured on the app's clock)."""

    def check(event: OncefireEvent, started: float) -> None:
        deadline = event.data.attributes.get("dispatch_deadline")
        elapsed = current_app().clock.now() - started
        if deadline is not None and elapsed > float(deadline):
            raise DispatchDeadlineExceeded(
                f"The task ran {elapsed:g} s, past its dispatch deadline of {deadline} s: "
                "the attempt counts as failed, as in Cloud Tasks."
            )

    runner: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        async def run_async(event: OncefireEvent) -> None:
            started = current_app().clock.now()
            await fn(_request(event))
            check(event, started)

        runner = run_async
    else:

        def run(event: OncefireEvent) -> None:
            started = current_app().clock.now()
            fn(_request(event))
            check(event, started)

        runner = run
    runner.__name__ = runner.__qualname__ = fn.__name__
    runner.__doc__ = fn.__doc__
    return runner


def on_task_dispatched(**options: Any) -> Callable[[F], F]:
    """Run the function for each task enqueued for it, as Cloud Tasks dispatches them."""
    where = "tasks_fn.on_task_dispatched"
    policy = retry_policy(options.pop("retry_config", None))
    limits = options.pop("rate_limits", None)
    opts = firebase_options.translate(where, options, allowed=ALLOWED)
    opts.update(rate_options(limits, opts.get("max_instances")))
    opts.update(retry=True, retry_policy=policy)
    app = default_app()

    def decorator(fn: F) -> F:
        app.on_message(topic_of(fn.__name__), name=fn.__name__, **opts)(_runner(fn))
        return fn

    return decorator
