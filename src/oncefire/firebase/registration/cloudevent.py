"""The event shapes Firebase functions receive, and how a Firebase function is registered."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from oncefire.events import Event as OncefireEvent

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class CloudEvent(Generic[T]):
    """An event as Firebase hands it over (CloudEvents fields); `id` is oncefire's event id."""

    id: str
    source: str
    type: str
    time: datetime
    data: T
    subject: str | None = None
    specversion: str = "1.0"
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Change(Generic[T]):
    """A document before and after a write, as Firebase's `Change`."""

    before: T
    after: T


def adapt(fn: Callable[..., Any], convert: Callable[[OncefireEvent], Any]) -> Callable[..., Any]:
    """The oncefire function that calls a Firebase-style fn with convert(event)."""
    if inspect.iscoroutinefunction(fn):

        async def run_async(event: OncefireEvent) -> Any:
            return await fn(convert(event))

        runner: Callable[..., Any] = run_async
    else:

        def run(event: OncefireEvent) -> Any:
            return fn(convert(event))

        runner = run
    runner.__name__ = runner.__qualname__ = fn.__name__
    runner.__doc__ = fn.__doc__
    return runner
