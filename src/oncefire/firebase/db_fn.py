"""Realtime Database triggers with Firebase's names: `on_value_written(reference="/messages/{id}")`.

A write through `db.reference()` starts every function whose reference pattern matches a
path the write changed, with that path's value: `event.data` is the value (created: after,
deleted: before) or a `Change(before, after)` (updated, written; a side that does not exist
is None); `event.params` the wildcards; `event.reference` the path. A write at /messages/m1
starts a function on /messages/{id}/original when it changed that child. Patterns take
`{name}`, `{name=*}`, `{name=**}`, `*` and `**`. Not retried unless `retry=True`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from oncefire.errors import InvalidPatternError
from oncefire.events import Event as OncefireEvent
from oncefire.events import EventType
from oncefire.firebase import options as firebase_options
from oncefire.firebase.db.values import check_key, shown
from oncefire.firebase.registration.apps import default_app
from oncefire.firebase.registration.cloudevent import Change, CloudEvent, adapt
from oncefire.model.paths import Pattern
from oncefire.model.trigger_kind import TriggerKind
from oncefire.triggers import Trigger, check_function, make_options

__all__ = [
    "Change",
    "Event",
    "on_value_created",
    "on_value_deleted",
    "on_value_updated",
    "on_value_written",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
TYPE_PREFIX = "google.firebase.database.ref.v1."
INSTANCE = "oncefire-default-rtdb"
KINDS = {
    "created": (EventType.VALUE_CREATED,),
    "updated": (EventType.VALUE_UPDATED,),
    "deleted": (EventType.VALUE_DELETED,),
    "written": (EventType.VALUE_CREATED, EventType.VALUE_UPDATED, EventType.VALUE_DELETED),
}
# Who wrote, in the Realtime Database's words (firestore_fn.AUTH_TYPES for the sources).
AUTH_TYPES = {"system": "admin", "unauthenticated": "unauthenticated", "user": "app_user"}
_HIDDEN = "_unnamed_"  # the names given to * and ** segments, left out of event.params


@dataclass(frozen=True)
class Event(CloudEvent[T]):
    """A Realtime Database event, as Firebase's `db_fn.Event`."""

    firebase_database_host: str = "localhost"
    instance: str = INSTANCE
    reference: str = ""
    location: str = "local"
    auth_type: str = "unknown"
    auth_id: str | None = None


def pattern_of(reference: Any) -> Pattern:
    """The oncefire pattern of a Firebase reference pattern."""
    if not isinstance(reference, str) or not reference.strip("/"):
        raise InvalidPatternError(
            f"reference={reference!r}: give a path pattern such as '/messages/{{pushId}}'."
        )
    segments = []
    for n, key in enumerate(reference.strip("/").split("/")):
        if key in ("*", "**"):
            key = f"{{{_HIDDEN}{n}{'=**' if key == '**' else ''}}}"
        elif key.startswith("{") and key.endswith("=*}"):
            key = key[:-3] + "}"
        elif not key.startswith("{"):
            check_key(key, f"reference={reference!r}")
        segments.append(key)
    return Pattern.parse("/".join(segments), depth="any")


def _converter(change: str) -> Callable[[OncefireEvent], Event[Any]]:
    def convert(event: OncefireEvent) -> Event[Any]:
        before, after = shown(event.raw.get("before")), shown(event.raw.get("after"))
        data: Any = Change(before, after)
        if change == "created":
            data = after
        elif change == "deleted":
            data = before
        auth = event.raw.get("auth") or {}
        return Event(
            id=event.id,
            source=f"//firebasedatabase.googleapis.com/projects/_/instances/{INSTANCE}",
            type=TYPE_PREFIX + change,
            time=event.time,
            data=data,
            subject=f"refs/{event.source}",
            params={k: v for k, v in event.params.items() if not k.startswith(_HIDDEN)},
            reference=event.source,
            auth_type=AUTH_TYPES.get(str(auth.get("type")), "unknown"),
            auth_id=auth.get("id"),
        )

    return convert


def _register(change: str, given: dict[str, Any]) -> Callable[[F], F]:
    reference = given.pop("reference", None)
    given.pop("instance", None)  # one database here: any instance is it
    pattern = pattern_of(reference)
    opts = firebase_options.event_options(f"db_fn.on_value_{change}", given)
    app = default_app()

    def decorator(fn: F) -> F:
        check_function(fn)
        # The App has no decorator of its own for this trigger kind: the Trigger is made here.
        app._add(
            Trigger(
                name=fn.__name__,
                fn=adapt(fn, _converter(change)),
                kind=TriggerKind.DATABASE,
                source=pattern.text,
                event_types=tuple(str(t) for t in KINDS[change]),
                options=make_options(**opts),
                pattern=pattern,
                is_change=change in ("updated", "written"),
            )
        )
        return fn

    return decorator


def on_value_created(**options: Any) -> Callable[[F], F]:
    """Run the function when a value appears at a path matching reference=."""
    return _register("created", options)


def on_value_updated(**options: Any) -> Callable[[F], F]:
    """Run the function when the value at a matching path changes (event.data: a Change)."""
    return _register("updated", options)


def on_value_deleted(**options: Any) -> Callable[[F], F]:
    """Run the function when the value at a matching path is deleted."""
    return _register("deleted", options)


def on_value_written(**options: Any) -> Callable[[F], F]:
    """Run the function on any change at a matching path (a Change; a side may be None)."""
    return _register("written", options)
