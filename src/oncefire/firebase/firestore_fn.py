"""Firestore triggers with Firebase's names: `on_document_created(document="users/{uid}")`.

`event.data` is a snapshot (created, deleted) or a `Change(before, after)` (updated, written;
for written, a side that does not exist is None), `event.params` the wildcards. An event
function is not retried unless `retry=True`, as in Firebase. The `*_with_auth_context`
triggers give an AuthEvent whose `auth_type` and `auth_id` say who wrote (AUTH_TYPES).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from oncefire.events import Change as OncefireChange
from oncefire.events import DocumentSnapshot as Snapshot
from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.firestore.client import Client
from oncefire.firebase.firestore.document import DocumentSnapshot
from oncefire.firebase.registration.apps import default_app
from oncefire.firebase.registration.cloudevent import Change, CloudEvent, adapt

__all__ = [
    "AuthEvent",
    "Change",
    "DocumentSnapshot",
    "Event",
    "on_document_created",
    "on_document_created_with_auth_context",
    "on_document_deleted",
    "on_document_deleted_with_auth_context",
    "on_document_updated",
    "on_document_updated_with_auth_context",
    "on_document_written",
    "on_document_written_with_auth_context",
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


@dataclass(frozen=True)
class AuthEvent(Event[T]):
    """A Firestore event with who wrote, as Firebase's `firestore_fn.AuthEvent`."""

    auth_type: str = "unknown"
    auth_id: str | None = None


# Who wrote (lineage.write_auth's types) in Firestore's words: a worker's write is "system",
# the CLI and an anonymous callable "unauthenticated"; a signed-in callable's user has no type
# of its own among Firestore's, so it is "unknown" (Firestore's type for other principals),
# with the user's uid as auth_id. A write nothing said the author of is "unknown" too.
AUTH_TYPES = {"system": "system", "unauthenticated": "unauthenticated", "user": "unknown"}


def _snapshot(snapshot: Snapshot, *, or_none: bool = False) -> DocumentSnapshot | None:
    if or_none and not snapshot.exists:
        return None
    found = DocumentSnapshot.of(Client().document(snapshot.path), snapshot)
    found.read_time = snapshot.update_time  # as Firebase gives the event's snapshots
    return found


def _auth_of(event: OncefireEvent) -> dict[str, Any]:
    auth = event.raw.get("auth") or {}
    auth_type = AUTH_TYPES.get(str(auth.get("type")), "unknown")
    return {"auth_type": auth_type, "auth_id": auth.get("id")}


def _converter(change: str, *, with_auth: bool = False) -> Callable[[OncefireEvent], Event[Any]]:
    def convert(event: OncefireEvent) -> Event[Any]:
        data: Any = event.data
        if isinstance(data, OncefireChange):
            is_written = change == "written"
            data = Change(
                _snapshot(data.before, or_none=is_written),
                _snapshot(data.after, or_none=is_written),
            )
        else:
            data = _snapshot(data)
        fields: dict[str, Any] = {
            "id": event.id,
            "source": event.source,
            "type": TYPE_PREFIX + change + (".withAuthContext" if with_auth else ""),
            "time": event.time,
            "data": data,
            "subject": f"documents/{event.source}",
            "params": dict(event.params),
            "document": event.source,
        }
        return AuthEvent(**fields, **_auth_of(event)) if with_auth else Event(**fields)

    return convert


def _register(
    change: str, document: str | None, given: dict[str, Any], *, with_auth: bool = False
) -> Callable[[F], F]:
    suffix = "_with_auth_context" if with_auth else ""
    opts = firebase_options.event_options(f"firestore_fn.on_document_{change}{suffix}", given)
    app = default_app()
    register = getattr(app, f"on_document_{change}")

    def decorator(fn: F) -> F:
        # Written triggers see every kind of change: a Change, whatever the event type.
        convert = _converter(change, with_auth=with_auth)
        register(document=document, name=fn.__name__, **opts)(adapt(fn, convert))
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


def on_document_created_with_auth_context(
    *, document: str | None = None, **options: Any
) -> Callable[[F], F]:
    """on_document_created, with an AuthEvent: who created the document."""
    return _register("created", document, options, with_auth=True)


def on_document_updated_with_auth_context(
    *, document: str | None = None, **options: Any
) -> Callable[[F], F]:
    """on_document_updated, with an AuthEvent: who changed the document."""
    return _register("updated", document, options, with_auth=True)


def on_document_deleted_with_auth_context(
    *, document: str | None = None, **options: Any
) -> Callable[[F], F]:
    """on_document_deleted, with an AuthEvent: who deleted the document."""
    return _register("deleted", document, options, with_auth=True)


def on_document_written_with_auth_context(
    *, document: str | None = None, **options: Any
) -> Callable[[F], F]:
    """on_document_written, with an AuthEvent: who wrote the document."""
    return _register("written", document, options, with_auth=True)
