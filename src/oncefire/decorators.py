"""The App's decorators, mixed into App: Decorators register event and HTTP functions
(documents, topics, schedules, requests), RowTriggers those on the application's own tables
(docs/tables.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from oncefire.errors import ConfigError
from oncefire.events import EventType
from oncefire.model.messages import attribute_filter
from oncefire.model.paths import Pattern, check_id
from oncefire.model.schedules import DEFAULT_GRACE, Schedule
from oncefire.model.trigger_kind import TriggerKind
from oncefire.retry import RetryPolicy
from oncefire.tables import ROW_CHANGES, parse_source, row_source, unwatch_table, watch_tables
from oncefire.triggers import (
    DOCUMENT_CHANGES,
    Options,
    Trigger,
    check_fields,
    check_function,
    check_ordering,
    function_name,
    make_options,
)
from oncefire.web.routes import check_route

if TYPE_CHECKING:
    from oncefire.clock import Clock
    from oncefire.stores.base import Store

F = TypeVar("F", bound=Callable[..., Any])


class Decorators:
    """on_document_created/updated/deleted/written, on_message, on_schedule, on_request."""

    routes: dict[str, Trigger]
    body_limits: dict[str, int]
    subpath_routes: set[str]

    def _add(self, trigger: Trigger) -> None:
        raise NotImplementedError

    def _document(
        self, change: str, pattern: str | None, options: dict[str, Any]
    ) -> Callable[[F], F]:
        name = options.pop("name", None)
        document = options.pop("document", None)  # Firebase's keyword for the pattern
        fields = check_fields(change, options.pop("fields", None))
        if (pattern is None) == (document is None):
            raise ConfigError(
                f"on_document_{change} takes one path pattern, like 'orders/{{orderId}}' (or "
                "document='orders/{orderId}' as in Firebase)."
            )
        parsed = Pattern.parse(pattern if pattern is not None else document)
        opts = make_options(**options)

        def decorator(fn: F) -> F:
            check_function(fn)
            self._add(
                Trigger(
                    name=function_name(name, fn),
                    fn=fn,
                    kind=TriggerKind.DOCUMENT,
                    source=parsed.text,
                    event_types=tuple(str(t) for t in DOCUMENT_CHANGES[change]),
                    options=opts,
                    pattern=parsed,
                    is_change=change in ("updated", "written"),
                    fields=fields,
                )
            )
            return fn

        return decorator

    def on_document_created(self, pattern: str | None = None, **options: Any) -> Callable[[F], F]:
        """Run the function when a document matching pattern is created."""
        return self._document("created", pattern, options)

    def on_document_updated(self, pattern: str | None = None, **options: Any) -> Callable[[F], F]:
        """Run the function when a matching document changes (event.data.before / after)."""
        return self._document("updated", pattern, options)

    def on_document_deleted(self, pattern: str | None = None, **options: Any) -> Callable[[F], F]:
        """Run the function when a matching document is deleted."""
        return self._document("deleted", pattern, options)

    def on_document_written(self, pattern: str | None = None, **options: Any) -> Callable[[F], F]:
        """Run the function on any create, update or delete of a matching document."""
        return self._document("written", pattern, options)

    def on_message(
        self,
        topic: str,
        *,
        max_delivery_attempts: int | None = None,
        dead_letter_topic: str | None = None,
        attributes: dict[str, str] | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """Run the function for each message published on topic (that carries attributes)."""
        name = options.pop("name", None)
        check_id(topic, "topic")
        if dead_letter_topic is not None:
            check_id(dead_letter_topic, "dead-letter topic")
            if dead_letter_topic == topic:
                raise ConfigError("dead_letter_topic must differ from the topic itself.")
        if max_delivery_attempts is not None:
            if options.get("retry") is False:
                raise ConfigError(
                    f"max_delivery_attempts={max_delivery_attempts!r} with retry=False: a "
                    "message that is not retried is delivered once; drop one of them."
                )
            base = options.get("retry_policy", RetryPolicy())
            if isinstance(base, RetryPolicy):  # else make_options says what it must be
                options["retry_policy"] = replace(base, max_attempts=max_delivery_attempts)
        opts = make_options(**options)
        check_ordering(TriggerKind.MESSAGE, opts)

        def decorator(fn: F) -> F:
            check_function(fn)
            self._add(
                Trigger(
                    name=function_name(name, fn),
                    fn=fn,
                    kind=TriggerKind.MESSAGE,
                    source=topic,
                    event_types=(str(EventType.MESSAGE_PUBLISHED),),
                    options=opts,
                    dead_letter_topic=dead_letter_topic,
                    attributes=attribute_filter(attributes),
                )
            )
            return fn

        return decorator

    def on_schedule(
        self,
        schedule: str,
        *,
        timezone: str | None = None,
        catch_up: str = "latest",
        misfire_grace: float = DEFAULT_GRACE,
        **options: Any,
    ) -> Callable[[F], F]:
        """Run the function on a schedule ('every 5 minutes' or a 5-field cron string, in
        timezone, an IANA name; UTC by default). Missed ticks (workers down): catch_up
        "latest" fires the newest once, "all" each, "none" none; never one more than
        misfire_grace seconds late."""
        name = options.pop("name", None)
        parsed = Schedule.parse(
            schedule, timezone=timezone, catch_up=catch_up, misfire_grace=misfire_grace
        )
        opts = make_options(**options)
        check_ordering(TriggerKind.SCHEDULE, opts)

        def decorator(fn: F) -> F:
            check_function(fn)
            fname = function_name(name, fn)
            self._add(
                Trigger(
                    name=fname,
                    fn=fn,
                    kind=TriggerKind.SCHEDULE,
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
        max_body_bytes: int = 10 * 1024 * 1024,
        name: str | None = None,
        subpaths: bool = False,
    ) -> Callable[[F], F]:
        """An HTTP function served by `oncefire run`: never retried, the caller gets the error.
        With subpaths=True it also serves every path below path (event.params["subpath"])."""
        verbs = check_route(path, methods, max_body_bytes, self.routes)
        opts = Options(retry=False, timeout=timeout, max_instances=max_instances)

        def decorator(fn: F) -> F:
            check_function(fn)
            trigger = Trigger(function_name(name, fn), fn, TriggerKind.HTTP, path, verbs, opts)
            self._add(trigger)
            self.routes[path] = trigger
            self.body_limits[path] = max_body_bytes
            if subpaths:
                self.subpath_routes.add(path)
            return fn

        return decorator


class RowTriggers:
    """on_row_inserted/updated/deleted/written, watch_tables and unwatch_table."""

    clock: Clock

    @property
    def triggers(self) -> dict[str, Trigger]:
        raise NotImplementedError

    @property
    def store(self) -> Store:
        raise NotImplementedError

    def _add(self, trigger: Trigger) -> None:
        raise NotImplementedError

    def migrate(self) -> int:
        raise NotImplementedError

    def _row(
        self, change: str, table: str, columns: Sequence[str] | None, options: dict[str, Any]
    ) -> Callable[[F], F]:
        name = options.pop("name", None)
        source = row_source(table, columns)
        opts = make_options(**options)
        types = tuple(str(t) for t in ROW_CHANGES[change])

        def decorator(fn: F) -> F:
            check_function(fn)
            self._add(Trigger(function_name(name, fn), fn, TriggerKind.ROW, source, types, opts))
            return fn

        return decorator

    def on_row_inserted(self, table: str, **options: Any) -> Callable[[F], F]:
        """Run the function for each row inserted into a table of the store's database
        (event.data.after; event.params: the primary key). See docs/tables.md."""
        return self._row("inserted", table, None, options)

    def on_row_updated(
        self, table: str, *, columns: Sequence[str] | None = None, **options: Any
    ) -> Callable[[F], F]:
        """Run the function for each updated row (event.data.before / after); with columns,
        only when one of them changed."""
        return self._row("updated", table, columns, options)

    def on_row_deleted(self, table: str, **options: Any) -> Callable[[F], F]:
        """Run the function for each row deleted from the table (event.data.before)."""
        return self._row("deleted", table, None, options)

    def on_row_written(
        self, table: str, *, columns: Sequence[str] | None = None, **options: Any
    ) -> Callable[[F], F]:
        """Run the function on each insert, update (of columns, if given) or delete."""
        return self._row("written", table, columns, options)

    def watch_tables(self) -> list[str]:
        """Create or upgrade the store's schema, even beside the database's own tables, and
        install or update the triggers of the tables the store's row functions name
        (idempotent; `oncefire migrate APP` does the same); one line per table changed."""
        self.migrate()
        own = [
            parse_source(t.source)[0] for t in self.triggers.values() if t.kind is TriggerKind.ROW
        ]
        return watch_tables(self.store, self.clock.now(), own)

    def unwatch_table(self, table: str) -> bool:
        """Drop the triggers of a table; whether it was watched."""
        return unwatch_table(self.store, table)
