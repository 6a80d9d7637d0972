"""Messages published as bytes or text: a Firebase function gets their base64 in
message.data and a clear ValueError from message.json when they are not JSON; oncefire's
own functions get the bytes; JSON messages are as before."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from oncefire import App
from oncefire.errors import InvalidMessageError
from oncefire.events import Event
from oncefire.firebase import initialize_app, pubsub_fn
from oncefire.firebase.registration.apps import set_default_app
from oncefire.testing import deliver, make_event

RAW = b"World \x00\xff\xfe not JSON"


@pytest.fixture
def default_app(app: App) -> Iterator[App]:
    set_default_app(app)
    yield app
    set_default_app(None)


def firebase_function(topic: str) -> list[tuple[bytes, Any]]:
    """(the decoded bytes, .json or the error it raised) of each message a Firebase function
    on topic gets."""
    seen: list[tuple[bytes, Any]] = []

    @pubsub_fn.on_message_published(topic=topic)
    def decode(event: pubsub_fn.CloudEvent[pubsub_fn.MessagePublishedData[Any]]) -> None:
        message = event.data.message
        try:
            body: Any = message.json
        except ValueError as error:
            body = error
        seen.append((base64.b64decode(message.data), body))

    return seen


def test_published_bytes_reach_a_firebase_function_as_they_were(default_app: App) -> None:
    seen = firebase_function("raw")
    # A ported module publishes through its Firebase app, which is the App.
    initialize_app().publish("raw", RAW, attributes={"kind": "bytes"})
    default_app.publish("raw", b'{"a": 1}')  # bytes that happen to be JSON
    default_app.publish("raw", "World")  # a str is JSON, as before: '"World"'
    default_app.drain()
    (raw, error), (json_bytes, parsed), (text, word) = seen
    assert raw == RAW
    assert isinstance(error, ValueError)
    assert str(error).startswith("Unable to parse Pub/Sub message data as JSON:")
    assert (json_bytes, parsed) == (b'{"a": 1}', {"a": 1})
    assert (text, word) == (b'"World"', "World")


def test_oncefire_functions_get_the_bytes(app: App) -> None:
    seen: list[Event] = []

    @app.on_message("raw")
    def take(event: Event) -> None:
        seen.append(event)

    app.publish("raw", RAW)
    app.publish("raw", bytearray(b"[1, 2]"))
    app.publish("raw", {"json": True})
    app.drain()
    raw, listed, plain = (event.data for event in seen)
    assert (raw.data, listed.data, plain.data) == (RAW, b"[1, 2]", {"json": True})
    assert (listed.json, plain.json) == ([1, 2], {"json": True})
    with pytest.raises(InvalidMessageError, match="not JSON text"):
        _ = raw.json


def test_bytes_keep_through_a_dead_letter_topic(app: App) -> None:
    kept: list[Any] = []

    @app.on_message("jobs", dead_letter_topic="jobs-dead", retry=False)
    def fail(event: Event) -> None:
        raise RuntimeError("no")

    @app.on_message("jobs-dead")
    def keep(event: Event) -> None:
        kept.append(event.data.data)

    app.publish("jobs", RAW)
    app.drain()
    app.drain()
    assert kept == [RAW]


def test_bytes_in_a_transaction_commit_with_it(app: App) -> None:
    seen: list[Any] = []

    @app.on_message("raw")
    def take(event: Event) -> None:
        seen.append(event.data.data)

    with pytest.raises(RuntimeError), app.db.transaction() as tx:
        tx.publish("raw", b"lost")
        raise RuntimeError("rolled back")
    with app.db.transaction() as tx:
        tx.publish("raw", b"kept")
    app.drain()
    assert seen == [b"kept"]


def test_make_event_builds_a_message_of_bytes(default_app: App) -> None:
    seen = firebase_function("made")
    deliver(default_app, "decode", make_event("message.published", "made", RAW), times=1)
    assert seen[0][0] == RAW
