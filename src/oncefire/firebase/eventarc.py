"""Publishing custom events on an Eventarc channel, with the Admin SDK's names in Python
spelling (firebase_admin has no eventarc module):

    eventarc.channel().publish(eventarc.CloudEvent(type="order.v1.created", source="/shop"))

Each event is a message on the topic `firebase.eventarc.<location>.<channel>` with its
CloudEvent attributes as the message's, for `eventarc_fn`'s routing. The events of one call
commit together, joining a document transaction the thread has open.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from oncefire.clock import to_datetime
from oncefire.errors import ConfigError
from oncefire.firebase.registration.apps import current_app

__all__ = ["Channel", "CloudEvent", "channel"]

log = logging.getLogger(__name__)
DEFAULT_CHANNEL = "locations/us-central1/channels/firebase"
DEFAULT_LOCATION = "us-central1"
TOPIC_PREFIX = "firebase.eventarc."
_NAME = re.compile(r"^(?:projects/[^/]+/)?locations/([^/]+)/channels/([^/]+)$")
_EXTENSION = re.compile(r"^[a-z0-9]{1,20}$")
# Attributes of a CloudEvent with a meaning of their own (not extensions).
CONTEXT = frozenset({"type", "source", "id", "specversion", "subject", "time", "datacontenttype"})


def topic_of(channel_name: str | None) -> str:
    """The topic of a channel: its full name, `locations/L/channels/C` (project ignored) or
    `C` (in us-central1), as Firebase reads them."""
    name = DEFAULT_CHANNEL if channel_name is None else channel_name
    if not isinstance(name, str) or not name:
        raise ConfigError(f"channel={channel_name!r}: give a channel's name.")
    if "/" not in name:
        return f"{TOPIC_PREFIX}{DEFAULT_LOCATION}.{name}"
    match = _NAME.match(name)
    if match is None:
        raise ConfigError(
            f"channel={name!r} is not a channel name: use 'locations/LOCATION/channels/ID' or 'ID'."
        )
    return f"{TOPIC_PREFIX}{match.group(1)}.{match.group(2)}"


class CloudEvent:
    """A custom event to publish: `type` and `source` are required; `id` and `time` are set
    when published if left out; extension attributes are keywords (`region="eu"`) or
    `extensions={...}`, as the Admin SDK takes them beside the others."""

    def __init__(
        self,
        type: str,
        source: str,
        data: Any = None,
        subject: str | None = None,
        id: str | None = None,
        time: datetime | str | None = None,
        datacontenttype: str | None = None,
        specversion: str = "1.0",
        extensions: dict[str, str] | None = None,
        **attributes: str,
    ) -> None:
        self.type, self.source, self.data, self.subject = type, source, data, subject
        self.id, self.time, self.datacontenttype = id, time, datacontenttype
        self.specversion = specversion
        self.extensions = {**(extensions or {}), **attributes}

    def __repr__(self) -> str:
        return f"CloudEvent(type={self.type!r}, source={self.source!r}, id={self.id!r})"


def attributes_of(event: Any, now: float) -> tuple[dict[str, str], Any]:
    """(message attributes, data) of a CloudEvent, checked: this module's CloudEvent or the
    cloudevents library's (an object with get_attributes() and get_data())."""
    if isinstance(event, CloudEvent):
        given: dict[str, Any] = {
            k: getattr(event, k) for k in CONTEXT if getattr(event, k) is not None
        }
        given.update(event.extensions)
        data = event.data
    elif callable(getattr(event, "get_attributes", None)):
        given, data = dict(event.get_attributes()), event.get_data()
    else:
        raise ConfigError(f"{event!r} is not a CloudEvent: publish eventarc.CloudEvent(...)s.")
    for required in ("type", "source"):
        if not isinstance(given.get(required), str) or not given[required]:
            raise ConfigError(f"A CloudEvent needs a non-empty string {required!r}.")
    if isinstance(given.get("time"), datetime):
        given["time"] = given["time"].isoformat().replace("+00:00", "Z")
    given.setdefault("time", to_datetime(now).isoformat().replace("+00:00", "Z"))
    given.setdefault("specversion", "1.0")
    for key, value in given.items():
        if key not in CONTEXT and not _EXTENSION.match(key):
            raise ConfigError(
                f"Extension attribute {key!r}: names are 1 to 20 lowercase letters or digits."
            )
        if not isinstance(value, str):
            raise ConfigError(f"Attribute {key}={value!r} must be a string.")
    return given, data


def channel(name: str | None = None, allowed_event_types: Iterable[str] | None = None) -> Channel:
    """A handle to a channel (Firebase's default channel when name is None)."""
    return Channel(name, allowed_event_types)


class Channel:
    """An Eventarc channel: publish custom events to the functions that take them."""

    def __init__(
        self,
        name: str | None = None,
        allowed_event_types: Iterable[str] | None = None,
        app: Any = None,
    ) -> None:
        self.name = DEFAULT_CHANNEL if name is None else name
        self.topic = topic_of(self.name)
        if isinstance(allowed_event_types, str):
            allowed_event_types = [allowed_event_types]
        self.allowed_event_types = (
            None if allowed_event_types is None else frozenset(allowed_event_types)
        )
        self._app = app

    def publish(self, events: Any) -> None:
        """Publish one CloudEvent or a list, in one transaction; events whose type is not in
        allowed_event_types (when the channel names some) are left out, as Firebase does."""
        app = self._app if self._app is not None else current_app()
        batch = list(events) if isinstance(events, list | tuple) else [events]
        now = app.clock.now()
        messages = [attributes_of(event, now) for event in batch]
        kept = [
            (attributes, data)
            for attributes, data in messages
            if self.allowed_event_types is None or attributes["type"] in self.allowed_event_types
        ]
        if len(kept) < len(messages):
            log.info(
                "%d event(s) not of the channel's allowed types were left out",
                len(messages) - len(kept),
            )
        with app.db.transaction() as tx:
            for attributes, data in kept:
                tx.publish(self.topic, data, attributes)
