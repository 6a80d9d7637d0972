"""Firestore triggers with Firebase's names: `on_document_created(document="users/{uid}")`.

`event.data` is a snapshot (created, deleted) or a `Change(before, after)` (updated, written;
for written, a side that does not exist is None), `event.params` the wildcards. An event
function is not retried unless `retry=True`, as in Firebase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from oncefire.events import Change as OncefireChange
from oncefire.events import DocumentSnapshot as Snapshot
from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.cloudevent import Change, CloudEvent, adapt
from oncefire.firebase.defaults import current_app, default_app
from oncefire.firebase.firestore import DocumentSnapshot

__all__ = [
    "Change",
    "DocumentSnapshot",
    "Event",
    "on_document_created",
    "on_document_deleted",
    "on_document_updated",
    "on_document_written",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
TYPE_PREFIX = "google.cloud.firestore.document.v1."


@dataclass(frozen=True)
class Event(CloudEvent[T]):
    """A Firestore event, as Firebase's `firestore_fn.Event`: `document` is the path."""

    document: str = ""
    database: str = "(default)"
    namespace: str = "(default)"


def _snapshot(snapshot: Snapshot, *, or_none: bool = False) -> DocumentSnapshot | None:
    if or_none and not snapshot.exists:
        return None
    return DocumentSnapshot(snapshot, current_app().db)


def _converter(kind: str) -> Callable[[OncefireEvent], Event[Any]]:
    def convert(event: OncefireEvent) -> Event[Any]:
        data: Any = event.data
        if isinstance(data, OncefireChange):
            is_written = kind == "written"
            data = Change(
                _snapshot(data.before, or_none=is_written),
                _snapshot(data.after, or_none=is_written),
            )
        else:
            data = _snapshot(data)
        return Event(
            id=event.id,
            source=event.source,
            type=TYPE_PREFIX + kind,
            time=event.time,
            data=data,
            subject=f"documents/{event.source}",
            params=dict(event.params),
            document=event.source,
        )

    return convert


def _register(kind: str, document: str | None, given: dict[str, Any]) -> Callable[[F], F]:
    where = f"firestore_fn.on_document_{kind}"
    opts = firebase_options.event_options(where, given)
    app = default_app()
    register = getattr(app, f"on_document_{kind}")

    def decorator(fn: F) -> F:
        # Written triggers see every kind of change: a Change, whatever the event type.
        register(document=document, name=fn.__name__, **opts)(adapt(fn, _converter(kind)))
        return fn

    return decorator


def on_document_created(*, document: str | None = None, **options: Any) -> Callable[[F], F]:
    """Run the function when a document matching `document` is created."""
    return _register("created", document, options)


def on_document_updated(*, document: str | None = None, **options: Any) -> Callable[[F], F]:
    """Run the function when a matching document changes (event.data is a Change)."""
    return _register("updated", document, options)


def on_document_deleted(*, document: str | None = None, **options: Any) -> Callable[[F], F]:
    """Run the function when a matching document is deleted (event.data: the old snapshot)."""
    return _register("deleted", document, options)


def on_document_written(*, document: str | None = None, **options: Any) -> Callable[[F], F]:
    """Run the function on any write of a matching document (a Change; a side may be None)."""
    return _register("written", document, options)
