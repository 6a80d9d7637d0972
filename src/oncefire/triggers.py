"""Triggers: which events start which function, and the options that bound each run."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oncefire.errors import ConfigError
from oncefire.events import EventType
from oncefire.paths import Pattern
from oncefire.retry import RetryPolicy
from oncefire.schedules import Schedule

DOCUMENT_KINDS: dict[str, tuple[str, ...]] = {
    "created": (EventType.DOCUMENT_CREATED,),
    "updated": (EventType.DOCUMENT_UPDATED,),
    "deleted": (EventType.DOCUMENT_DELETED,),
    "written": (
        EventType.DOCUMENT_CREATED,
        EventType.DOCUMENT_UPDATED,
        EventType.DOCUMENT_DELETED,
    ),
}


@dataclass(frozen=True, slots=True)
class Options:
    """The options every event trigger takes (see DESIGN.md)."""

    retry: bool = True
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float = 60.0
    max_instances: int | None = None
    max_event_age: float | None = None
    permanent_errors: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.retry_policy, RetryPolicy):
            raise ConfigError("retry_policy must be a RetryPolicy.")
        if self.timeout <= 0:
            raise ConfigError(f"timeout={self.timeout} must be a positive number of seconds.")
        if self.max_instances is not None and self.max_instances < 1:
            raise ConfigError(f"max_instances={self.max_instances} must be at least 1 or None.")
        if self.max_event_age is not None and self.max_event_age <= 0:
            raise ConfigError(f"max_event_age={self.max_event_age} must be positive or None.")
        for kind in self.permanent_errors:
            if not (isinstance(kind, type) and issubclass(kind, BaseException)):
                raise ConfigError(
                    f"permanent_errors holds {kind!r}, which is not an exception type."
                )


@dataclass(frozen=True, slots=True)
class Trigger:
    """A registered function: its name, what starts it, and its options."""

    name: str
    fn: Callable[..., Any]
    kind: str  # "document", "message", "schedule"
    source: str  # path pattern, topic or schedule name
    event_types: tuple[str, ...]
    options: Options
    pattern: Pattern | None = None
    schedule: Schedule | None = None
    is_change: bool = False  # event.data is a Change(before, after)
    dead_letter_topic: str | None = None

    @property
    def is_async(self) -> bool:
        """Whether the function is an `async def`."""
        return inspect.iscoroutinefunction(self.fn)

    def matches(self, event_type: str, source: str) -> dict[str, str] | None:
        """The params if an event of this type and source starts this function, else None."""
        if event_type not in self.event_types:
            return None
        if self.pattern is not None:
            return self.pattern.match(source)
        return {} if source == self.source else None


def make_options(**kwargs: Any) -> Options:
    """Options from decorator keywords, with a clear error for an unknown one."""
    known = set(Options.__dataclass_fields__)
    unknown = set(kwargs) - known
    if unknown:
        raise ConfigError(
            f"Unknown trigger option(s) {', '.join(sorted(unknown))}; "
            f"the options are {', '.join(sorted(known))}."
        )
    if "permanent_errors" in kwargs:
        kwargs["permanent_errors"] = tuple(kwargs["permanent_errors"])
    return Options(**kwargs)
