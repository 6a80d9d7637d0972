"""The App: registers functions, owns the store, and is what the CLI and dashboard drive."""

from __future__ import annotations

import hashlib
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from typing import Any, TypeVar

from oncefire import codec, idempotency
from oncefire.clock import Clock, SystemClock
from oncefire.deadletters import DeadLetters
from oncefire.documents import Database
from oncefire.errors import ConfigError
from oncefire.events import EventType, StoredEvent
from oncefire.outbox import emit, subscribers
from oncefire.paths import Pattern, check_id
from oncefire.retry import RetryPolicy
from oncefire.schedules import Schedule
from oncefire.settings import Settings
from oncefire.stats import FunctionStats
from oncefire.stores import open_store
from oncefire.stores.base import AttemptResult, Claimed, FunctionRecord, Lease, Store
from oncefire.triggers import DOCUMENT_KINDS, Options, Trigger, make_options
from oncefire.worker import DrainSummary, Worker

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


class App:
    """An oncefire application: functions, their triggers, and the store they share."""

    def __init__(
        self,
        store: str | None = None,
        *,
        clock: Clock | None = None,
        max_payload_bytes: int | None = None,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> None:
        given = {"store": store, "max_payload_bytes": max_payload_bytes, **overrides}
        given = {k: v for k, v in given.items() if v is not None}
        if settings is None:
            self.settings = Settings.from_env(**given)
        else:
            self.settings = replace(settings, **given)
        self.clock: Clock = clock or SystemClock()
        self.triggers: dict[str, Trigger] = {}
        self.routes: dict[str, Trigger] = {}
        self.dead_letters = DeadLetters(self)
        self.ttl_policies: dict[str, str] = {}
        self._store: Store | None = None
        self._db: Database | None = None
        self._lock = threading.RLock()
        self._next_tick: dict[str, float] = {}

    # -- store -------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The store, opened (and migrated) on first use."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    store = open_store(self.settings)
                    self._store = store
                    self._register(list(self.triggers.values()))
        return self._store

    @property
    def db(self) -> Database:
        """The document database (`app.db.collection(...)`)."""
        if self._db is None:
            self._db = Database(self.store, self.clock)
        return self._db

    def close(self) -> None:
        """Close the store's connections."""
        if self._store is not None:
            self._store.close()
            self._store = None
            self._db = None

    def _register(self, triggers: Sequence[Trigger]) -> None:
        records = [
            FunctionRecord(t.name, t.kind, t.source, t.event_types, self.clock.now())
            for t in triggers
            if t.kind != "http"
        ]
        if records and self._store is not None:
            self._store.register_functions(records)

    def _add(self, trigger: Trigger) -> None:
        with self._lock:
            if trigger.name in self.triggers:
                raise ConfigError(
                    f"A function named {trigger.name!r} is already registered: pass name=... "
                    "to give one of them another name."
                )
            check_id(trigger.name, "function name")
            idempotency.check_registration(trigger.name, trigger.fn, trigger.options)
            if trigger.schedule is not None:  # raises for a schedule that never fires
                self._next_tick[trigger.name] = trigger.schedule.next_after(self.clock.now())
            self.triggers[trigger.name] = trigger
            self._register([trigger])
            with suppress(AttributeError, TypeError):  # lets @idempotent spot a wrong order
                trigger.fn.__oncefire_trigger__ = trigger.name  # type: ignore[attr-defined]

    # -- triggers ----------------------------------------------------------------------

    def _document(self, kind: str, pattern: str, options: dict[str, Any]) -> Callable[[F], F]:
        name = options.pop("name", None)
        parsed = Pattern.parse(pattern)
        opts = make_options(**options)

        def decorator(fn: F) -> F:
            self._add(
                Trigger(
                    name=name or fn.__name__,
                    fn=fn,
                    kind="document",
                    source=parsed.text,
                    event_types=tuple(str(t) for t in DOCUMENT_KINDS[kind]),
                    options=opts,
                    pattern=parsed,
                    is_change=kind in ("updated", "written"),
                )
            )
            return fn

        return decorator

    def on_document_created(self, pattern: str, **options: Any) -> Callable[[F], F]:
        """Run the function when a document matching pattern is created."""
        return self._document("created", pattern, options)

    def on_document_updated(self, pattern: str, **options: Any) -> Callable[[F], F]:
        """Run the function when a matching document changes (event.data.before / after)."""
        return self._document("updated", pattern, options)

    def on_document_deleted(self, pattern: str, **options: Any) -> Callable[[F], F]:
        """Run the function when a matching document is deleted."""
        return self._document("deleted", pattern, options)

    def on_document_written(self, pattern: str, **options: Any) -> Callable[[F], F]:
        """Run the function on any create, update or delete of a matching document."""
        return self._document("written", pattern, options)

    def on_message(
        self,
        topic: str,
        *,
        max_delivery_attempts: int | None = None,
        dead_letter_topic: str | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """Run the function for each message published on topic."""
        name = options.pop("name", None)
        check_id(topic, "topic")
        if dead_letter_topic is not None:
            check_id(dead_letter_topic, "dead-letter topic")
            if dead_letter_topic == topic:
                raise ConfigError("dead_letter_topic must differ from the topic itself.")
        if max_delivery_attempts is not None:
            base = options.get("retry_policy", RetryPolicy())
            options["retry_policy"] = RetryPolicy(
                max_delivery_attempts,
                base.first_delay,
                base.multiplier,
                base.max_delay,
                base.jitter,
            )
        opts = make_options(**options)

        def decorator(fn: F) -> F:
            self._add(
                Trigger(
                    name=name or fn.__name__,
                    fn=fn,
                    kind="message",
                    source=topic,
                    event_types=(str(EventType.MESSAGE_PUBLISHED),),
                    options=opts,
                    dead_letter_topic=dead_letter_topic,
                )
            )
            return fn

        return decorator

    def on_schedule(self, schedule: str, **options: Any) -> Callable[[F], F]:
        """Run the function on a schedule ('every 5 minutes' or a 5-field cron string, UTC)."""
        name = options.pop("name", None)
        parsed = Schedule.parse(schedule)
        opts = make_options(**options)

        def decorator(fn: F) -> F:
            fname = name or fn.__name__
            self._add(
                Trigger(
                    name=fname,
                    fn=fn,
                    kind="schedule",
                    source=fname,
                    event_types=(str(EventType.SCHEDULE_TICK),),
                    options=opts,
                    schedule=parsed,
                )
            )
            return fn

        return decorator

    def on_request(
        self,
        path: str,
        *,
        methods: Sequence[str] = ("GET",),
        timeout: float = 60.0,
        max_instances: int | None = None,
        name: str | None = None,
    ) -> Callable[[F], F]:
        """An HTTP function: never retried, the caller gets the error."""
        if not path.startswith("/"):
            raise ConfigError(f"An HTTP function's path must start with '/'; got {path!r}.")
        opts = Options(retry=False, timeout=timeout, max_instances=max_instances)

        def decorator(fn: F) -> F:
            trigger = Trigger(
                name or fn.__name__, fn, "http", path, tuple(m.upper() for m in methods), opts
            )
            self._add(trigger)
            self.routes[path] = trigger
            return fn

        return decorator

    # -- events ------------------------------------------------------------------------

    def publish(self, topic: str, data: Any, *, attributes: dict[str, str] | None = None) -> str:
        """Publish a message on a topic; return its id (the event id)."""
        check_id(topic, "topic")
        payload = {"data": data, "attributes": dict(attributes or {})}
        codec.encode_document(payload)
        with self.store.transaction() as tx:
            event = emit(
                tx,
                event_type=EventType.MESSAGE_PUBLISHED,
                source=topic,
                data=payload,
                now=self.clock.now(),
            )
        assert event is not None
        return event.id

    def forward(
        self, trigger: Trigger, claimed: Claimed, lease: Lease, result: AttemptResult
    ) -> bool:
        """Republish an exhausted message on its function's dead-letter topic, atomically."""
        topic = trigger.dead_letter_topic
        assert topic is not None
        now = self.clock.now()
        data = dict(claimed.event.data)
        attributes = dict(data.get("attributes") or {})
        attributes.update(
            {
                "oncefire.source_topic": claimed.event.source,
                "oncefire.source_function": trigger.name,
                "oncefire.source_event": claimed.event.id,
            }
        )
        payload = {"data": data.get("data"), "attributes": attributes}
        event = StoredEvent(
            codec.new_id(now),
            EventType.MESSAGE_PUBLISHED,
            topic,
            now,
            payload,
            len(codec.dumps(payload).encode()),
        )
        with self.store.read() as tx:
            names = subscribers(tx.functions(), EventType.MESSAGE_PUBLISHED, topic)
        return self.store.forward(lease, result, event, names)

    def fire_due_schedules(self) -> int:
        """Emit the tick of each schedule that is due (once across all workers); how many."""
        fired = 0
        now = self.clock.now()
        for name, due in list(self._next_tick.items()):
            if due > now:
                continue
            trigger = self.triggers[name]
            assert trigger.schedule is not None
            # The id is derived from the schedule and the tick, so every worker emits the same
            # event and the store keeps the first.
            digest = int.from_bytes(hashlib.sha256(f"{name}@{due}".encode()).digest()[:8], "big")
            event_id = codec.stable_id(due, digest)
            with self.store.transaction() as tx:
                if emit(
                    tx,
                    event_type=EventType.SCHEDULE_TICK,
                    source=name,
                    data={"scheduled_time": due, "schedule": trigger.schedule.spec},
                    now=due,
                    event_id=event_id,
                ):
                    fired += 1
            self._next_tick[name] = trigger.schedule.next_after(max(due, now))
        return fired

    def ttl(self, collection: str, *, field: str) -> None:
        """Delete documents of a collection once the time in `field` has passed."""
        from oncefire.paths import collection_path

        self.ttl_policies[collection_path(collection)] = field

    # -- running -----------------------------------------------------------------------

    def drain(self, *, functions: Sequence[str] | None = None) -> DrainSummary:
        """Run every delivery due now, in this process, until none is due."""
        worker = Worker(self, functions=functions)
        try:
            return worker.drain()
        finally:
            worker.shutdown()

    def run_worker(self, *, concurrency: int | None = None, is_process: bool = False) -> None:
        """Serve deliveries in this process until SIGTERM or SIGINT."""
        worker = Worker(self, concurrency=concurrency, is_process=is_process)

        def stop(signum: int, _frame: Any) -> None:
            log.info("signal %d: stopping after in-flight attempts", signum)
            worker.stop_requested.set()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
        worker.run()

    def stats(self, window: float = 86400) -> dict[str, FunctionStats]:
        """Per-function figures over the last `window` seconds."""
        counts = self.store.counts(self.clock.now() - window)
        return {name: FunctionStats.from_counts(name, c) for name, c in sorted(counts.items())}
