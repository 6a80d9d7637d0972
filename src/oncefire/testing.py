"""Tools for testing functions: a clock you move by hand, events as triggers build them,
and redelivery of one event as many times as you like."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from oncefire import codec
from oncefire.app import App
from oncefire.errors import ConfigError
from oncefire.events import DOCUMENT_TYPES, ROW_TYPES, EventType, StoredEvent
from oncefire.retry import is_count, is_real
from oncefire.worker import DrainSummary, Worker

__all__ = ["TestClock", "deliver", "make_event", "oncefire_app"]


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
    """An event as a trigger would build it (for documents and rows, data is the document or
    row after; for rows, key is the primary key, source is `table/pk`)."""
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
