"""Topic triggers with Firebase's names: `on_message_published(topic="orders")`.

`event.data.message` has `.data` (the message's bytes in base64, as Firebase gives them),
`.json` (those bytes read as JSON; a ValueError when they are not), `.attributes`,
`.message_id` and `.publish_time`. Publish JSON with `app.publish(topic, data)` or `oncefire
publish TOPIC JSON` (its bytes are the JSON text), or bytes with `app.publish(topic, b"raw")`
or `oncefire publish TOPIC --text World`. Not retried unless `retry=True`, as in Firebase.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from oncefire.events import Event as OncefireEvent
from oncefire.events import Message as OncefireMessage
from oncefire.firebase import options as firebase_options
from oncefire.firebase.registration.apps import default_app
from oncefire.firebase.registration.cloudevent import CloudEvent, adapt
from oncefire.model import codec

__all__ = ["CloudEvent", "Message", "MessagePublishedData", "on_message_published"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
EVENT_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"


@dataclass(frozen=True)
class Message(Generic[T]):
    """A topic message, as Firebase's `pubsub_fn.Message`."""

    message_id: str
    publish_time: datetime
    data: str  # base64 of the message's bytes (of its JSON text, for a JSON message)
    attributes: dict[str, str] = field(default_factory=dict)
    ordering_key: str | None = None

    @property
    def json(self) -> T:
        """The message's bytes read as JSON; a ValueError saying why when they are not."""
        try:
            return json.loads(base64.b64decode(self.data).decode("utf-8"))  # type: ignore[no-any-return]
        except ValueError as error:
            raise ValueError(f"Unable to parse Pub/Sub message data as JSON: {error}") from error


@dataclass(frozen=True)
class MessagePublishedData(Generic[T]):
    """What a topic event carries, as Firebase's `pubsub_fn.MessagePublishedData`."""

    message: Message[T]
    subscription: str


def _convert(event: OncefireEvent) -> CloudEvent[MessagePublishedData[Any]]:
    message: OncefireMessage = event.data
    raw = message.data if isinstance(message.data, bytes) else codec.dumps(message.data).encode()
    published = Message[Any](
        message_id=message.id,
        publish_time=message.publish_time,
        data=base64.b64encode(raw).decode(),
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
