"""Topic messages: the payload a publish stores, and the message a dead-letter topic gets.

A message carries JSON (`{"data": value, "attributes": {...}}`) or raw bytes, kept as their
base64 (`{"bytes": "aGk=", "attributes": {...}}`): publishing bytes (`app.publish(topic,
b"hi")`, `oncefire publish TOPIC --text hi`) is how a text that is not JSON is sent.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from oncefire.errors import ConfigError, InvalidMessageError
from oncefire.events import EventType, StoredEvent
from oncefire.model import codec
from oncefire.model.paths import check_id

if TYPE_CHECKING:
    from oncefire.stores.base import Leased
    from oncefire.triggers import Trigger

RESERVED_PREFIX = "oncefire."  # the attributes of a message oncefire republishes (below)


def message_payload(topic: str, data: Any, attributes: Any) -> dict[str, Any]:
    """The stored form of a message, checked: {"data": ..., "attributes": {str: str}}."""
    check_id(topic, "topic")
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise InvalidMessageError(
            f"attributes must be a dict of strings to strings; got {type(attributes).__name__}:"
            " pass attributes={'key': 'value'}."
        )
    for key, value in attributes.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidMessageError(
                f"Attribute {key!r}={value!r}: attribute names and values must be strings."
            )
        if not key:
            raise InvalidMessageError(
                f"Attribute ''={value!r}: an attribute name is a non-empty string."
            )
        if key.startswith(RESERVED_PREFIX):
            raise InvalidMessageError(
                f"Attribute {key!r}: names starting with {RESERVED_PREFIX!r} are oncefire's own "
                "(a dead-letter topic's message names its source with them): use another name."
            )
    payload: dict[str, Any] = {"data": data, "attributes": dict(attributes)}
    if isinstance(data, bytes | bytearray | memoryview):
        payload = {"bytes": base64.b64encode(data).decode(), "attributes": dict(attributes)}
    codec.encode_document(payload, is_fields=False)  # JSON-ready, no NUL, under the size limit
    return payload


def attribute_filter(attributes: Any) -> tuple[tuple[str, str], ...]:
    """A message function's attribute filter, checked and sorted: it starts for a message
    only if the message carries each of these attributes with this value."""
    if attributes is None:
        return ()
    if not isinstance(attributes, dict) or not attributes:
        raise ConfigError(
            f"attributes={attributes!r}: filter messages with a non-empty dict of attribute "
            "names to the values a message must carry, such as {'type': 'order.created'}."
        )
    for key, value in attributes.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise ConfigError(
                f"Attribute filter {key!r}={value!r}: names are non-empty strings and values "
                "strings, as a message's attributes are."
            )
        if "\x00" in key or "\x00" in value:
            raise ConfigError(f"Attribute filter {key!r}={value!r} holds a NUL: remove it.")
    return tuple(sorted(attributes.items()))


def carries(required: tuple[tuple[str, str], ...], payload: Any) -> bool:
    """Whether a stored message payload ({"data", "attributes"}) has every required
    attribute value (a payload that is not known, None, passes: it is not a routing)."""
    if not required or payload is None:
        return True
    given = payload.get("attributes") if isinstance(payload, dict) else None
    given = given if isinstance(given, dict) else {}
    return all(given.get(key) == value for key, value in required)


def dead_letter_message(trigger: Trigger, leased: Leased, now: float) -> StoredEvent:
    """The message republished on a function's dead-letter topic, naming where it came from."""
    assert trigger.dead_letter_topic is not None
    data = dict(leased.event.data)
    attributes = dict(data.get("attributes") or {})
    attributes.update(
        {
            "oncefire.source_topic": leased.event.source,
            "oncefire.source_function": trigger.name,
            "oncefire.source_event": leased.event.id,
        }
    )
    payload = {"data": data.get("data"), "attributes": attributes}
    if "bytes" in data:
        payload = {"bytes": data["bytes"], "attributes": attributes}
    return StoredEvent(
        codec.new_id(now),
        EventType.MESSAGE_PUBLISHED,
        trigger.dead_letter_topic,
        now,
        payload,
        len(codec.dumps(payload).encode()),
        # Written because a function ran that event: a loop through a dead-letter topic
        # keeps counting its depth (see lineage.py).
        leased.event.root_id or leased.event.id,
        leased.event.depth + 1,
    )
