"""Triggers: which events start which function, and the options that bound each run."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oncefire.errors import ConfigError
from oncefire.events import EventType, StoredEvent
from oncefire.model.budgets import Budget
from oncefire.model.paths import Pattern
from oncefire.model.rates import RateLimit
from oncefire.model.schedules import Schedule
from oncefire.model.trigger_kind import TriggerKind
from oncefire.retry import RetryPolicy, is_count, is_real
from oncefire.tables import row_matches

# The event types each change a document trigger takes ("on_document_<change>").
DOCUMENT_CHANGES: dict[str, tuple[str, ...]] = {
    "created": (EventType.DOCUMENT_CREATED,),
    "updated": (EventType.DOCUMENT_UPDATED,),
    "deleted": (EventType.DOCUMENT_DELETED,),
    "written": (
        EventType.DOCUMENT_CREATED,
        EventType.DOCUMENT_UPDATED,
        EventType.DOCUMENT_DELETED,
    ),
}


_ROW = TriggerKind.ROW  # bound once: looked up on its enum class it costs more, per attempt


@dataclass(frozen=True, slots=True)
class Options:
    """The options every event trigger takes (see DESIGN.md)."""

    retry: bool = True
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float = 60.0
    max_instances: int | None = None
    max_event_age: float | None = None
    permanent_errors: tuple[type[BaseException], ...] = ()
    budget: Budget | None = None  # "5000/day" or a dict in a decorator, parsed by make_options
    ordering: str | None = None  # "document": one document's deliveries run one at a time
    ordering_key: Callable[[Any], object] | None = None  # event -> key, as ordering does
    rate_limit: str | None = None  # "100/s", "30/m", "500/h": starts across all workers

    def __post_init__(self) -> None:
        if not isinstance(self.retry, bool):
            raise ConfigError(f"retry={self.retry!r} must be True or False.")
        if not isinstance(self.retry_policy, RetryPolicy):
            raise ConfigError("retry_policy must be a RetryPolicy.")
        if not is_real(self.timeout) or self.timeout <= 0:
            raise ConfigError(f"timeout={self.timeout!r} must be a positive number of seconds.")
        if self.max_instances is not None and (
            not is_count(self.max_instances) or self.max_instances < 1
        ):
            raise ConfigError(
                f"max_instances={self.max_instances!r} must be a whole number of at least 1, "
                "or None."
            )
        if self.max_event_age is not None and (
            not is_real(self.max_event_age) or self.max_event_age <= 0
        ):
            raise ConfigError(
                f"max_event_age={self.max_event_age!r} must be a positive number of seconds, "
                "or None."
            )
        if not isinstance(self.permanent_errors, tuple):
            raise ConfigError(
                f"permanent_errors={self.permanent_errors!r} must be a tuple of exception types, "
                "such as (ValueError,)."
            )
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise ConfigError(
                f'budget={self.budget!r}: write budget="5000/day" or a dict such as '
                'budget={"invocations": "5000/day", "failure_rate": 0.5, "min_attempts": 100}.'
            )
        for error_type in self.permanent_errors:
            if not (isinstance(error_type, type) and issubclass(error_type, BaseException)):
                raise ConfigError(
                    f"permanent_errors holds {error_type!r}, which is not an exception type."
                )
        if self.ordering not in (None, "document"):
            raise ConfigError(
                f'ordering={self.ordering!r} is not an ordering: use ordering="document" to run '
                "the deliveries of one document one at a time, in event order, or "
                "ordering_key=callable to key them by what it returns."
            )
        if self.ordering_key is not None and (
            not callable(self.ordering_key) or inspect.iscoroutinefunction(self.ordering_key)
        ):
            raise ConfigError(
                f"ordering_key={self.ordering_key!r} is not a plain function: pass a def or "
                "lambda of the event that returns its key, such as "
                'ordering_key=lambda e: e.data.after.get("customer").'
            )
        if self.ordering is not None and self.ordering_key is not None:
            raise ConfigError(
                'Pass ordering="document" or ordering_key=callable, not both: each says what '
                "the deliveries run one at a time by."
            )
        if self.rate_limit is not None:
            RateLimit.parse(self.rate_limit)

    def redelivery_window(self) -> float:
        """Longest time after its event that a delivery may still run: max_event_age plus the
        retry window. A record of an event's effect must be kept at least this long."""
        window = self.retry_policy.window() if self.retry else 0.0
        return (self.max_event_age or 0.0) + window

    @property
    def ordered_by(self) -> str | None:
        """What the deliveries are ordered by: "document", "key" (ordering_key) or None."""
        return "key" if self.ordering_key is not None else self.ordering

    @property
    def rate(self) -> RateLimit | None:
        """The parsed rate_limit, if any."""
        return None if self.rate_limit is None else RateLimit.parse(self.rate_limit)


@dataclass(frozen=True, slots=True)
class Trigger:
    """A registered function: its name, what starts it, and its options."""

    name: str
    fn: Callable[..., Any]
    kind: TriggerKind
    source: str  # path pattern, table (and update filter: "orders[status]"), topic or schedule
    event_types: tuple[str, ...]
    options: Options
    pattern: Pattern | None = None
    schedule: Schedule | None = None
    is_change: bool = False  # event.data is a Change(before, after)
    dead_letter_topic: str | None = None
    fields: tuple[str, ...] = ()  # an update starts it only if one of these changed
    attributes: tuple[tuple[str, str], ...] = ()  # a message starts it only if it carries these
    # Whether the function is an `async def`: asked twice per attempt, so found once.
    is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ConfigError(
                f"The function of trigger {self.name!r} is {self.fn!r}, which cannot be called: "
                "decorate a def."
            )
        object.__setattr__(self, "kind", TriggerKind(self.kind))
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))

    def matches(self, event_type: str, source: str) -> dict[str, str] | None:
        """The params if an event of this type and source starts this function, else None."""
        if event_type not in self.event_types:
            return None
        if self.pattern is not None:
            return self.pattern.match(source)
        if self.kind is _ROW:
            return {} if row_matches(self.source, event_type, source) else None
        return {} if source == self.source else None

    def params_of(self, event: StoredEvent) -> dict[str, Any]:
        """event.params: the pattern's wildcards, or a row's primary key columns by name."""
        if self.kind is _ROW:
            return dict(event.data.get("pk") or {})
        return self.matches(event.type, event.source) or {}


def check_fields(change: str, fields: Any) -> tuple[str, ...]:
    """The `fields` filter of a document trigger of this change ("updated", ...), checked: a
    non-empty list or tuple of dotted field paths, for update and written triggers only."""
    if fields is None:
        return ()
    if change not in ("updated", "written"):
        raise ConfigError(
            f"fields= filters updates: on_document_{change} does not take it (a creation or a "
            "deletion changes every field). Use on_document_updated or on_document_written."
        )
    if not isinstance(fields, list | tuple) or not fields:
        raise ConfigError(
            f"fields={fields!r} must be a non-empty list of field paths, such as "
            '["status", "customer.email"].'
        )
    for path in fields:
        if not isinstance(path, str) or not all(path.split(".")) or "\x00" in path:
            raise ConfigError(
                f"fields holds {path!r}, which is not a field path: use a field name or a "
                'dotted path such as "customer.email".'
            )
    return tuple(fields)


def make_options(**kwargs: Any) -> Options:
    """Options from decorator keywords, with a clear error for an unknown one or a mistyped
    permanent_errors."""
    kwargs = checked(kwargs)
    known = set(Options.__dataclass_fields__)
    unknown = set(kwargs) - known
    if unknown:
        raise ConfigError(
            f"Unknown trigger option(s) {', '.join(sorted(unknown))}; "
            f"the options are {', '.join(sorted(known))}."
        )
    if kwargs.get("retry") is False and "retry_policy" in kwargs:
        raise ConfigError(
            f"retry=False with retry_policy={kwargs['retry_policy']!r}: a function that is not "
            "retried has no retry policy; drop retry=False to retry on the policy, or drop "
            "the policy."
        )
    error_types = kwargs.get("permanent_errors")
    if isinstance(error_types, list | set | frozenset):  # any collection of types will do
        kwargs["permanent_errors"] = tuple(error_types)
    if kwargs.get("budget") is not None and not isinstance(kwargs["budget"], Budget):
        kwargs["budget"] = Budget.parse(kwargs["budget"])
    return Options(**kwargs)


def function_name(name: Any, fn: Callable[..., Any]) -> str:
    """A trigger's name: the one given, else the function's own."""
    if name is None:
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str):
            raise ConfigError(f"{fn!r} has no __name__ to name the function by: pass name='...'.")
        return name
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"name={name!r}: a function's name is a non-empty string; leave name out to use "
            "the function's own."
        )
    return name


def check_ordering(kind: TriggerKind, options: Options) -> None:
    """ordering="document" orders by the event's document (or row): a message or schedule
    function has none, and would run one delivery at a time."""
    if options.ordering == "document" and kind in (TriggerKind.MESSAGE, TriggerKind.SCHEDULE):
        raise ConfigError(
            f'ordering="document" orders the deliveries of one document, and a {kind} '
            "function has no document: use ordering_key=callable to order by a key of the "
            "event, or drop ordering."
        )


def check_function(fn: Any) -> None:
    """A trigger decorator's argument must be a function."""
    if not callable(fn):
        raise ConfigError(
            f"A trigger decorates a callable (a plain or async def); got "
            f"{type(fn).__name__} {fn!r}: put the decorator on a def."
        )


def checked(options: dict[str, Any]) -> dict[str, Any]:
    """Trigger options with the type mistakes Python would report obscurely turned into a
    ConfigError (numbers are checked where the options are built)."""
    errors = options.get("permanent_errors")
    if errors is not None:
        if isinstance(errors, type):
            raise ConfigError(
                f"permanent_errors takes a tuple of exception classes: write "
                f"permanent_errors=({errors.__name__},)."
            )
        try:
            items = tuple(errors)
        except TypeError:
            items = (errors,)
        if not all(isinstance(e, type) and issubclass(e, BaseException) for e in items):
            raise ConfigError(
                f"permanent_errors={errors!r}: give a tuple of exception classes, "
                "e.g. (ValueError, KeyError)."
            )
    return options
