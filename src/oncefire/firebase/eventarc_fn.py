"""Custom event functions with Firebase's names:
`@eventarc_fn.on_custom_event_published(event_type=..., channel=..., filters={...})`.

The function runs for each event published on its channel (`eventarc.channel(...).publish`)
whose type is event_type and whose attributes equal each of filters; the routing is the
topic's attribute filter, so an event it does not match makes no delivery for it. Not
retried unless `retry=True`, as in Firebase.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from oncefire.errors import ConfigError
from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.eventarc import topic_of
from oncefire.firebase.registration.apps import default_app
from oncefire.firebase.registration.cloudevent import CloudEvent, adapt

__all__ = ["CloudEvent", "on_custom_event_published"]

F = TypeVar("F", bound=Callable[..., Any])


def _convert(event: OncefireEvent) -> CloudEvent[Any]:
    message = event.data
    attributes = message.attributes
    time = attributes.get("time")
    return CloudEvent(
        id=attributes.get("id", event.id),
        source=attributes["source"],
        type=attributes["type"],
        time=datetime.fromisoformat(time.replace("Z", "+00:00")) if time else event.time,
        data=message.data,
        subject=attributes.get("subject"),
        specversion=attributes.get("specversion", "1.0"),
    )


def on_custom_event_published(
    event_type: str | None = None,
    *,
    channel: str | None = None,
    filters: dict[str, str] | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Run the function for each event of event_type on the channel that matches filters."""
    if not isinstance(event_type, str) or not event_type:
        raise ConfigError(
            "on_custom_event_published takes event_type='...', the type of the events to run "
            "the function for."
        )
    if filters is not None and not isinstance(filters, dict):
        raise ConfigError(f"filters={filters!r}: give a dict of attribute names to values.")
    if filters is not None and "type" in filters:
        raise ConfigError("filters cannot name 'type': event_type says which type it takes.")
    topic = topic_of(channel)
    required = {**(filters or {}), "type": event_type}
    opts = firebase_options.event_options("eventarc_fn.on_custom_event_published", options)
    app = default_app()

    def decorator(fn: F) -> F:
        app.on_message(topic, attributes=required, name=fn.__name__, **opts)(adapt(fn, _convert))
        return fn

    return decorator
