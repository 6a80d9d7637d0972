"""Tools for testing functions: a clock you move by hand, events as triggers build them,
redelivery of one event as many times as you like, and the faults that make it happen: a
store that fails, a worker that dies after the effect."""

from __future__ import annotations

import base64
import copy
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oncefire.app import App
from oncefire.engine import crashes
from oncefire.engine.worker import DrainSummary, Worker
from oncefire.errors import ConfigError, StoreUnavailableError
from oncefire.events import DOCUMENT_TYPES, ROW_TYPES, VALUE_TYPES, EventType, StoredEvent
from oncefire.model import codec
from oncefire.retry import is_count, is_real

__all__ = [
    "STORE_CALLS",
    "Crashes",
    "StoreFaults",
    "TestClock",
    "crash_after_effect",
    "deliver",
    "fail_store_calls",
    "make_event",
    "oncefire_app",
]


class TestClock:
    """A clock that moves only when told: `clock.advance(seconds)`."""

    __test__ = False  # not a pytest test class

    def __init__(self, start: float | datetime = 1_800_000_000.0) -> None:
        self._now = start.timestamp() if isinstance(start, datetime) else float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward; return the new time."""
        if not is_real(seconds) or seconds < 0:
            raise ConfigError(
                f"advance({seconds!r}): a TestClock moves forward by a finite number of seconds."
            )
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, when: float | datetime) -> None:
        """Jump to a moment (forward only)."""
        target = when.timestamp() if isinstance(when, datetime) else float(when)
        with self._lock:
            if target < self._now:
                raise ConfigError("A TestClock only moves forward.")
            self._now = target  # exactly: now + (target - now) can differ from target


def _record(data: dict[str, Any] | None, at: float) -> dict[str, Any] | None:
    return None if data is None else {"data": data, "create_time": at, "update_time": at}


def make_event(
    type: str = "document.created",
    source: str = "orders/o1",
    data: Any = None,
    *,
    id: str | None = None,
    time: float | datetime | None = None,
    before: dict[str, Any] | None = None,
    attributes: dict[str, str] | None = None,
    key: dict[str, Any] | None = None,
) -> StoredEvent:
    """An event as a trigger would build it (for documents, rows and Realtime Database values,
    data is the document, row or value after; for rows, key is the primary key, source is
    `table/pk`; a message's data may be bytes)."""
    at = time.timestamp() if isinstance(time, datetime) else time
    at = 1_800_000_000.0 if at is None else float(at)
    if type in DOCUMENT_TYPES:
        after = None if type == EventType.DOCUMENT_DELETED else (data or {})
        if type == EventType.DOCUMENT_DELETED and before is None:
            before = data or {}
        payload: dict[str, Any] = {"before": _record(before, at), "after": _record(after, at)}
    elif type in ROW_TYPES:
        after = None if type == EventType.ROW_DELETED else (data or {})
        if type == EventType.ROW_DELETED and before is None:
            before = data or {}
        table = source.partition("/")[0]
        payload = {"table": table, "pk": dict(key or {}), "before": before, "after": after}
    elif type == EventType.MESSAGE_PUBLISHED:
        payload = {"data": data, "attributes": dict(attributes or {})}
        if isinstance(data, bytes):  # published as bytes: kept as their base64
            payload = {
                "bytes": base64.b64encode(data).decode(),
                "attributes": payload["attributes"],
            }
    elif type in VALUE_TYPES:  # a Realtime Database value at source
        after = None if type == EventType.VALUE_DELETED else data
        payload = {"before": data if before is None and after is None else before, "after": after}
    elif type == EventType.SCHEDULE_TICK:
        payload = {"scheduled_time": at, "schedule": source}
    else:
        raise ConfigError(f"Unknown event type {type!r}; use one of {[str(t) for t in EventType]}.")
    size = len(codec.dumps(payload).encode())
    return StoredEvent(id or codec.new_id(at), type, source, at, payload, size)


def deliver(app: App, function_name: str, event: StoredEvent, times: int = 2) -> DrainSummary:
    """Run one function on the same event `times` times, each a separate delivery that goes
    through the full attempt path (lease, run, write the ending), as a platform redelivering
    it would."""
    if function_name not in app.triggers:
        raise ConfigError(f"No function named {function_name!r} is registered on this app.")
    if not is_count(times) or times < 1:
        raise ConfigError(f"deliver(times={times!r}): deliver the event at least once.")
    with app.store.transaction() as tx:
        tx.append(event, [], app.clock.now())  # stored once; an existing id is kept
        tx.mark_routed(event.id, "unrouted", None)  # its deliveries are made below, not routed
    worker = Worker(app.runtime, functions=[function_name], concurrency=1)
    try:
        for _ in range(times):
            with app.store.transaction() as tx:
                ids = tx.add_deliveries(event.id, [function_name], app.clock.now())
            worker.drain(delivery_ids=ids)
        return worker.summary()
    finally:
        worker.shutdown()


# The kinds of store call fail_store_calls fails, by the Store methods that make them.
STORE_CALLS: dict[str, tuple[str, ...]] = {
    "read": ("read",),  # a read outside a transaction: ref.get(), a query
    "write": ("transaction", "set_document"),  # a write or publish: fails at its commit
    "lease": ("take_due",),  # a worker taking due deliveries
    "renew": ("renew",),  # a worker renewing the leases of running attempts
    "complete": ("complete", "complete_many"),  # writing a success
    "retry": ("retry",),  # writing a failure that will be retried
    "bury": ("bury",),  # writing a failure that makes a dead letter
}


class StoreFaults:
    """The store calls fail_store_calls fails: `failed` counts them so far."""

    def __init__(self, kind: str, times: int, error: BaseException | type[BaseException]):
        self.kind, self.times, self.failed = kind, times, 0
        self._error = error
        self._lock = threading.Lock()

    def fail(self) -> None:
        """Raise the error if calls are still to fail; else do nothing."""
        with self._lock:
            if self.failed >= self.times:
                return
            self.failed += 1
        if isinstance(self._error, BaseException):
            raise copy.copy(self._error)
        raise self._error(f"The store is unavailable (fail_store_calls {self.kind!r}).")


def _failing(method: Callable[..., Any], faults: StoreFaults, name: str) -> Callable[..., Any]:
    if name != "transaction":

        def failing(*args: Any, **kwargs: Any) -> Any:
            faults.fail()
            return method(*args, **kwargs)

        return failing

    @contextmanager
    def transaction() -> Iterator[Any]:
        with method() as tx:
            yield tx
            faults.fail()  # at the commit: the transaction rolls back, nothing is written

    return transaction


@contextmanager
def fail_store_calls(
    app: App,
    kind: str,
    times: int = 1,
    error: BaseException | type[BaseException] = StoreUnavailableError,
) -> Iterator[StoreFaults]:
    """Within the block, the next `times` store calls of a kind that the app makes (its
    functions', its workers' and your own alike) fail with `error`, as when the database is
    unreachable; the others run as usual. Kinds: STORE_CALLS."""
    names = STORE_CALLS.get(kind)
    if names is None:
        raise ConfigError(f"No store call kind {kind!r}: use one of {', '.join(STORE_CALLS)}.")
    if not isinstance(times, int) or isinstance(times, bool) or times < 1:
        raise ConfigError(f"times={times!r}: fail at least 1 store call.")
    is_error = isinstance(error, BaseException) or (
        isinstance(error, type) and issubclass(error, BaseException)
    )
    if not is_error:
        raise ConfigError(f"error={error!r} is not an exception or an exception class.")
    store, faults = app.store, StoreFaults(kind, times, error)
    own = {name: vars(store).get(name) for name in names}  # another block's, if nested
    for name in names:
        setattr(store, name, _failing(getattr(store, name), faults, name))
    try:
        yield faults
    finally:
        for name, previous in own.items():
            if previous is None:
                delattr(store, name)
            else:
                setattr(store, name, previous)


@dataclass
class Crashes:
    """The attempts crash_after_effect ended: `count` of them so far."""

    _plan: crashes.CrashPlan

    @property
    def count(self) -> int:
        """How many attempts ended as crashes."""
        return self._plan.crashed


@contextmanager
def crash_after_effect(app: App, function_name: str, times: int = 1) -> Iterator[Crashes]:
    """Within the block, the next `times` attempts of the function end as if their worker died
    the moment the function returned: its effects happened, nothing of its ending is written
    (not the attempt, not its @idempotent records), and its lease is left to run out. Move
    the clock past the lease (and an @idempotent record's) and drain: the delivery is rescued,
    counted `crashed`, and delivered again, as after a real crash."""
    if function_name not in app.triggers:
        raise ConfigError(f"No function named {function_name!r} is registered on this app.")
    if not isinstance(times, int) or isinstance(times, bool) or times < 1:
        raise ConfigError(f"times={times!r}: crash at least 1 attempt.")
    plan = crashes.CrashPlan(app.runtime, function_name, times)
    crashes.start(plan)
    try:
        yield Crashes(plan)
    finally:
        crashes.stop(plan)


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is only needed for the fixture
    pass
else:

    @pytest.fixture
    def oncefire_app(tmp_path: Any) -> Iterator[App]:
        """An App on a fresh SQLite file with a TestClock (`app.clock`)."""
        app = App(f"sqlite:///{tmp_path}/oncefire.db", clock=TestClock())
        yield app
        app.close()
