"""Topic triggers with Firebase's names: `on_message_published(topic="orders")`.

`event.data.message` has `.json` (the message body), `.data` (its JSON text in base64, as
Firebase gives it), `.attributes` and `.message_id`. Publish with `app.publish(topic, data)`
or `oncefire publish TOPIC JSON`. Not retried unless `retry=True`, as in Firebase.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from oncefire import codec
from oncefire.events import Event as OncefireEvent
from oncefire.events import Message as OncefireMessage
from oncefire.firebase import options as firebase_options
from oncefire.firebase.cloudevent import CloudEvent, adapt
from oncefire.firebase.defaults import default_app

__all__ = ["CloudEvent", "Message", "MessagePublishedData", "on_message_published"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
EVENT_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"


@dataclass(frozen=True)
class Message(Generic[T]):
    """A topic message, as Firebase's `pubsub_fn.Message`."""

    message_id: str
    publish_time: str
    data: str  # base64 of the message's JSON text
    attributes: dict[str, str] = field(default_factory=dict)
    ordering_key: str | None = None

    @property
    def json(self) -> T:
        """The message body, decoded from `data` (ValueError if it is not JSON)."""
        return json.loads(base64.b64decode(self.data))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class MessagePublishedData(Generic[T]):
    """What a topic event carries, as Firebase's `pubsub_fn.MessagePublishedData`."""

    message: Message[T]
    subscription: str


def _convert(event: OncefireEvent) -> CloudEvent[MessagePublishedData[Any]]:
    message: OncefireMessage = event.data
    text = codec.dumps(message.data)
    published = Message[Any](
        message_id=message.id,
        publish_time=message.publish_time.isoformat().replace("+00:00", "Z"),
        data=base64.b64encode(text.encode()).decode(),
        attributes=dict(message.attributes),
    )
    return CloudEvent(
        id=event.id,
        source=f"topics/{message.topic}",
        type=EVENT_TYPE,
        time=event.time,
        data=MessagePublishedData(published, subscription=event.function),
    )


def on_message_published(*, topic: str, **options: Any) -> Callable[[F], F]:
    """Run the function for each message published on topic."""
    opts = firebase_options.event_options("pubsub_fn.on_message_published", options)
    app = default_app()

    def decorator(fn: F) -> F:
        app.on_message(topic, name=fn.__name__, **opts)(adapt(fn, _convert))
        return fn

    return decorator
