"""Task queue functions with Firebase's names: `@tasks_fn.on_task_dispatched(retry_config=...,
rate_limits=...)`, fed by `functions.task_queue(name).enqueue({"data": ...})`.

A task is a message on the topic `firebase.tasks.<function>`, delivered at its schedule time
to the function inside a Flask request context; its `CallableRequest.data` is the "data"
enqueued (a body of another shape is a dead letter at once). Retry and rate settings map onto
oncefire's (registration/queue_options.py). `oncefire run` also serves it at `/<name>`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from oncefire.errors import OncefireError, PermanentError
from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.http import flask_bridge
from oncefire.firebase.http.callables import CallableRequest, handle
from oncefire.firebase.options import RateLimits, RetryConfig
from oncefire.firebase.registration.apps import current_app, default_app
from oncefire.firebase.registration.queue_options import rate_options, retry_policy

if TYPE_CHECKING:
    from starlette.responses import Response as StarletteResponse

__all__ = ["CallableRequest", "RateLimits", "RetryConfig", "on_task_dispatched"]

F = TypeVar("F", bound=Callable[..., Any])
TOPIC_PREFIX = "firebase.tasks."
HTTP_SUFFIX = ".http"  # the name of a task queue function's HTTP endpoint: <name>.http
ALLOWED = frozenset({"timeout_sec", "max_instances"})


def topic_of(function: str) -> str:
    """The topic whose messages are the tasks of a task queue function."""
    return TOPIC_PREFIX + function


class DispatchDeadlineExceeded(OncefireError):
    """An attempt ran past its task's dispatch_deadline_seconds: Cloud Tasks counts it as
    failed (DEADLINE_EXCEEDED) and retries the task, whatever the function returned."""


def _environ(event: OncefireEvent, request: dict[str, Any]) -> dict[str, Any]:
    """The WSGI environ of the request Cloud Tasks would send for this attempt."""
    from werkzeug.test import EnvironBuilder

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
    body = json.dumps(request.get("body"))
    path = f"/{event.function}"
    builder = EnvironBuilder(path=path, method="POST", headers=headers, data=body)
    try:
        return builder.get_environ()
    finally:
        builder.close()


@contextmanager
def _dispatched(event: OncefireEvent) -> Iterator[CallableRequest[Any]]:
    """The CallableRequest of a task's delivery, inside its Flask request context; its body
    must be `{"data": ...}`, as the callable protocol of task functions requires."""
    message = event.data
    request = message.data if isinstance(message.data, dict) else {}
    body = request.get("body")
    if not isinstance(body, dict) or list(body) != ["data"]:
        raise PermanentError(
            f"Bad Request: the body of task {message.attributes.get('task_id', event.id)} is "
            f"{body!r}, not {{'data': ...}}: enqueue {{'data': ...}}, which firebase_admin "
            "sends as the request's body."
        )
    with flask_bridge.flask_app().request_context(_environ(event, request)) as context:
        yield CallableRequest(data=body["data"], raw_request=context.request)


def _check_deadline(event: OncefireEvent, started: float) -> None:
    deadline = event.data.attributes.get("dispatch_deadline")
    elapsed = current_app().clock.now() - started
    if deadline is not None and elapsed > float(deadline):
        raise DispatchDeadlineExceeded(
            f"The task ran {elapsed:g} s, past its dispatch deadline of {deadline} s: the "
            "attempt counts as failed, as in Cloud Tasks."
        )


def _runner(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn as a message function: called with the task's CallableRequest, then held to its
    dispatch deadline (measured on the app's clock)."""
    runner: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        async def run_async(event: OncefireEvent) -> None:
            started = current_app().clock.now()
            with _dispatched(event) as request:
                await fn(request)
            _check_deadline(event, started)

        runner = run_async
    else:

        def run(event: OncefireEvent) -> None:
            started = current_app().clock.now()
            with _dispatched(event) as request:
                fn(request)
            _check_deadline(event, started)

        runner = run
    runner.__name__ = runner.__qualname__ = fn.__name__
    runner.__doc__ = fn.__doc__
    return runner


def _endpoint(fn: Callable[..., Any]) -> Callable[[OncefireEvent], StarletteResponse]:
    """The HTTP function at /<name>: the callable protocol, the function run at once."""
    root = f"/{fn.__name__}"

    def respond(request: Any) -> Any:
        return handle(fn, request)

    def run(event: OncefireEvent) -> StarletteResponse:
        return flask_bridge.serve(event, root, respond)

    run.__name__ = run.__qualname__ = fn.__name__ + HTTP_SUFFIX
    run.__doc__ = fn.__doc__
    return run


def on_task_dispatched(**options: Any) -> Callable[[F], F]:
    """Run the function for each task enqueued for it, as Cloud Tasks dispatches them; serve
    it at /<name> too."""
    where = "tasks_fn.on_task_dispatched"
    flask_bridge.require_flask(where)
    policy = retry_policy(options.pop("retry_config", None))
    limits = options.pop("rate_limits", None)
    opts = firebase_options.translate(where, options, allowed=ALLOWED)
    opts.update(rate_options(limits, opts.get("max_instances")))
    served = {k: v for k, v in opts.items() if k in ("timeout", "max_instances")}
    opts.update(retry=True, retry_policy=policy)
    app = default_app()

    def decorator(fn: F) -> F:
        name = fn.__name__
        app.on_message(topic_of(name), name=name, **opts)(_runner(fn))
        app.on_request(f"/{name}", methods=["POST"], name=name + HTTP_SUFFIX, **served)(
            _endpoint(fn)
        )
        return fn

    return decorator
