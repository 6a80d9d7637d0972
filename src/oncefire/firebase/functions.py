"""firebase_admin.functions: `task_queue(name).enqueue({"data": ...}, TaskOptions(...))` puts a
task on a task queue function's queue, to run at its schedule time; the function's
`req.data` is what "data" holds.

The task and its delivery commit in one transaction, joining one this thread has open. A
`task_id` in use, or used within the hour after its task ended, is refused with
`exceptions.AlreadyExistsError`, as Cloud Tasks does.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from oncefire.errors import ConfigError
from oncefire.events import CURRENT_EVENT, EventType
from oncefire.features import usage
from oncefire.firebase import tasks_fn
from oncefire.firebase.exceptions import AlreadyExistsError, NotFoundError
from oncefire.firebase.registration import queue_options
from oncefire.firebase.registration.apps import current_app
from oncefire.model import codec
from oncefire.model.messages import message_payload
from oncefire.model.outbox import emit, subscribers
from oncefire.retry import is_count

__all__ = ["TaskOptions", "TaskQueue", "task_queue"]

log = logging.getLogger(__name__)
TASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,500}$")
RESOURCE = re.compile(r"^(projects/[^/]+/)?locations/[^/]+/functions/([^/]+)$")
PUBLISHED = EventType.MESSAGE_PUBLISHED
KEPT_AFTER_END = 3600.0  # Cloud Tasks refuses a used task id for about an hour after its end
_noted_uri: set[str] = set()  # the queues whose ignored uri= the log has noted


@dataclass
class TaskOptions:
    """Options of one task, as firebase_admin's: when it runs, its deadline and its id."""

    schedule_delay_seconds: int | None = None
    schedule_time: datetime | None = None
    dispatch_deadline_seconds: int | None = None
    task_id: str | None = None
    headers: dict[str, str] | None = None
    uri: str | None = None


def task_queue(function_name: str, extension_id: str | None = None, app: Any = None) -> TaskQueue:
    """The queue of a task queue function: its name, `locations/L/functions/NAME` or
    `projects/P/locations/L/functions/NAME` (the project and location mean nothing here)."""
    return TaskQueue(function_name, extension_id, app)


class TaskQueue:
    """The queue of one task queue function."""

    def __init__(self, function_name: str, extension_id: str | None, app: Any) -> None:
        if not isinstance(function_name, str) or not function_name:
            raise ConfigError(f"function_name={function_name!r} must be a non-empty string.")
        name = function_name
        if "/" in name:
            match = RESOURCE.match(name)
            if match is None:
                raise ConfigError(
                    f"function_name={function_name!r} is not a function's name nor "
                    "'locations/LOCATION/functions/NAME'."
                )
            name = match.group(2)
        if extension_id is not None:
            if not isinstance(extension_id, str) or not extension_id:
                raise ConfigError(f"extension_id={extension_id!r} must be a non-empty string.")
            name = f"ext-{extension_id}-{name}"
        self.function_name = name
        self._app = app

    @property
    def app(self) -> Any:
        """The App whose store holds the queue."""
        return self._app if self._app is not None else current_app()

    def enqueue(self, task_data: Any, opts: TaskOptions | None = None) -> str:
        """Add a task with this data to the queue; return its id."""
        app, opts = self.app, opts if opts is not None else TaskOptions()
        if not isinstance(opts, TaskOptions):
            raise ConfigError(f"opts={opts!r}: pass a functions.TaskOptions(...).")
        now = app.clock.now()
        run_at = _run_at(opts, now)
        attributes = {"eta": f"{max(run_at, now):.6f}"}
        if opts.dispatch_deadline_seconds is not None:
            deadline = opts.dispatch_deadline_seconds
            if not is_count(deadline) or not 15 <= deadline <= 1800:
                raise ConfigError(
                    f"dispatch_deadline_seconds={deadline!r} must be a whole number of seconds "
                    "from 15 to 1800 (30 minutes)."
                )
            attributes["dispatch_deadline"] = str(deadline)
        task_id = opts.task_id
        if task_id is not None and (not isinstance(task_id, str) or not TASK_ID.match(task_id)):
            raise ConfigError(
                f"task_id={task_id!r}: a task id holds only letters, digits, hyphens and "
                "underscores, at most 500 of them."
            )
        # The request Cloud Tasks sends: task_data is its JSON body, as firebase_admin sends it.
        request: dict[str, Any] = {"body": task_data}
        if opts.headers:
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in opts.headers.items()):
                raise ConfigError(f"headers={opts.headers!r} must map strings to strings.")
            request["headers"] = dict(opts.headers)
        if opts.uri is not None and self.function_name not in _noted_uri:
            _noted_uri.add(self.function_name)  # once per queue and process
            log.info("enqueue: uri=%r is ignored: the task runs its queue's function", opts.uri)
        topic = tasks_fn.topic_of(self.function_name)
        chosen = task_id if task_id is not None else codec.new_id(now)
        attributes["task_id"] = chosen
        payload = message_payload(topic, request, attributes)
        # reading() is the transaction's own store handle: the task is emitted on it.
        with app.db.transaction() as tx, app.db.reading() as raw:
            if self.function_name not in subscribers(raw.functions(), PUBLISHED, topic):
                raise NotFoundError(
                    f"No task queue function named {self.function_name!r} is registered in "
                    "the store: declare it with @tasks_fn.on_task_dispatched and start its app."
                )
            if task_id is not None:
                key = f"{topic}/{task_id}"
                if not tx.claim(key, ttl=self._kept_for(app, max(run_at - now, 0.0))):
                    raise AlreadyExistsError(
                        f"A task with id {task_id!r} is on queue {self.function_name!r} or ran "
                        "there within the hour: a task id is used once."
                    )
            usage.count_write()
            emit(raw, event_type=PUBLISHED, source=topic, data=payload, now=now, at=run_at)
        return chosen

    def delete(self, task_id: str) -> None:
        """Not offered: a task once enqueued runs (or is dismissed as a dead letter)."""
        raise ConfigError(
            f"TaskQueue.delete({task_id!r}) is not offered: a queued task cannot be taken "
            "back; have the function skip it (check a document), or dismiss its dead letter."
        )

    def _kept_for(self, app: Any, delay: float) -> float:
        """How long a task id stays used: until the task can no longer run, plus an hour
        (and at least as long as the running function's claims must last)."""
        trigger = app.triggers.get(self.function_name)
        window = (
            trigger.options.redelivery_window()
            if trigger is not None
            else queue_options.retry_policy(None).window()
        )
        kept = delay + window + KEPT_AFTER_END
        running = CURRENT_EVENT.get()
        caller = None if running is None else app.triggers.get(running.function)
        if caller is not None:
            kept = max(kept, caller.options.redelivery_window())
        return kept


def _run_at(opts: TaskOptions, now: float) -> float:
    """The time a task is due, from schedule_delay_seconds or schedule_time (naive: UTC)."""
    delay, when = opts.schedule_delay_seconds, opts.schedule_time
    if delay is not None and when is not None:
        raise ConfigError("Pass schedule_delay_seconds or schedule_time, not both.")
    if delay is not None:
        if not is_count(delay) or delay < 0:
            raise ConfigError(
                f"schedule_delay_seconds={delay!r} must be a whole number of seconds, >= 0."
            )
        return now + delay
    if when is not None:
        if not isinstance(when, datetime):
            raise ConfigError(f"schedule_time={when!r} must be a datetime (UTC).")
        return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()
    return now
