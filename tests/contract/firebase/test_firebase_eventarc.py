"""Custom events (eventarc_fn.on_custom_event_published, eventarc.Channel.publish) on both
stores: an event reaches the functions of its channel, type and filters, and only those."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from oncefire import App, ConfigError
from oncefire.firebase import eventarc, eventarc_fn
from oncefire.firebase.registration.apps import set_default_app
from oncefire.firebase.registration.cloudevent import CloudEvent
from oncefire.testing import TestClock


@pytest.fixture
def default_app(store_url: str, clock: TestClock) -> Iterator[App]:
    """The default App a Firebase module registers on, on the test's store and clock."""
    app = App(store_url, clock=clock)
    previous = set_default_app(app)
    yield app
    set_default_app(previous)
    app.close()


@pytest.fixture
def seen(default_app: App) -> dict[str, list[CloudEvent[Any]]]:
    """What each function of a shop's custom events got."""
    got: dict[str, list[CloudEvent[Any]]] = {"created": [], "eu": [], "mine": []}

    @eventarc_fn.on_custom_event_published(event_type="com.shop.order.v1.created")
    def created(event: CloudEvent[Any]) -> None:
        got["created"].append(event)

    @eventarc_fn.on_custom_event_published(
        event_type="com.shop.order.v1.created", filters={"region": "eu", "source": "/shop"}
    )
    def eu(event: CloudEvent[Any]) -> None:
        got["eu"].append(event)

    @eventarc_fn.on_custom_event_published(
        event_type="com.shop.order.v1.created", channel="locations/europe-west1/channels/mine"
    )
    def mine(event: CloudEvent[Any]) -> None:
        got["mine"].append(event)

    return got


def test_a_custom_event_reaches_the_functions_its_type_and_filters_match(
    default_app: App, seen: dict[str, list[CloudEvent[Any]]], clock: TestClock
) -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    eventarc.channel().publish(
        eventarc.CloudEvent(
            type="com.shop.order.v1.created",
            source="/shop",
            data={"order": "o1"},
            subject="orders/o1",
            id="e-1",
            time=at,
            extensions={"region": "eu"},
        )
    )
    default_app.drain()
    [event] = seen["created"]
    assert (event.id, event.type, event.source, event.subject, event.time) == (
        "e-1",
        "com.shop.order.v1.created",
        "/shop",
        "orders/o1",
        at,
    )
    assert event.data == {"order": "o1"}
    assert [e.id for e in seen["eu"]] == ["e-1"]
    assert seen["mine"] == []  # another channel


def test_an_event_its_filters_do_not_match_makes_no_delivery_for_it(
    default_app: App, seen: dict[str, list[CloudEvent[Any]]]
) -> None:
    firebase = eventarc.Channel("projects/p/locations/us-central1/channels/firebase")
    firebase.publish(
        [
            eventarc.CloudEvent(type="com.shop.order.v1.created", source="/shop", region="us"),
            eventarc.CloudEvent(type="com.shop.order.v1.created", source="/elsewhere"),
            eventarc.CloudEvent(type="com.shop.order.v1.deleted", source="/shop"),
        ]
    )
    eventarc.channel("mine").publish(
        eventarc.CloudEvent(type="com.shop.order.v1.created", source="/shop")
    )  # channel "mine" in us-central1: not the europe-west1 one
    eventarc.channel("locations/europe-west1/channels/mine").publish(
        eventarc.CloudEvent(type="com.shop.order.v1.created", source="/x", data=[1])
    )
    default_app.drain()
    assert [e.source for e in seen["created"]] == ["/shop", "/elsewhere"]
    assert seen["eu"] == []
    assert [e.data for e in seen["mine"]] == [[1]]
    assert default_app.stats()["eu"].succeeded == 0  # not one delivery was made for it
    # Every event without a function stays unrouted, for a function registered later.
    assert default_app.unrouted_count() == 2


def test_a_channel_leaves_out_the_types_it_does_not_allow(
    default_app: App, seen: dict[str, list[CloudEvent[Any]]], clock: TestClock
) -> None:
    allowed = eventarc.channel(allowed_event_types=["com.shop.order.v1.deleted"])
    allowed.publish(eventarc.CloudEvent(type="com.shop.order.v1.created", source="/shop"))
    default_app.drain()
    assert seen["created"] == []
    assert default_app.unrouted_count() == 0  # not published at all
    eventarc.channel().publish(eventarc.CloudEvent(type="com.shop.order.v1.created", source="/s"))
    default_app.drain()
    [event] = seen["created"]
    assert event.time == datetime.fromtimestamp(clock.now(), UTC)  # set when published


def test_events_published_in_a_rolled_back_transaction_reach_nobody(
    default_app: App, seen: dict[str, list[CloudEvent[Any]]]
) -> None:
    with pytest.raises(RuntimeError), default_app.db.transaction():
        eventarc.channel().publish(
            eventarc.CloudEvent(type="com.shop.order.v1.created", source="/shop")
        )
        raise RuntimeError("roll back")
    default_app.drain()
    assert seen["created"] == []


@pytest.mark.parametrize(
    "event",
    [
        eventarc.CloudEvent(type="", source="/s"),
        eventarc.CloudEvent(type="t", source=""),
        eventarc.CloudEvent(type="t", source="/s", extensions={"Region": "eu"}),
        eventarc.CloudEvent(type="t", source="/s", extensions={"region": 1}),  # type: ignore[dict-item]
        {"type": "t", "source": "/s"},
    ],
)
def test_bad_events_are_refused_and_none_of_the_batch_is_published(
    default_app: App, event: Any
) -> None:
    good = eventarc.CloudEvent(type="t", source="/s")
    with pytest.raises(ConfigError):
        eventarc.channel().publish([good, event])
    assert default_app.unrouted_count() == 0


def test_bad_triggers_are_refused(default_app: App) -> None:
    with pytest.raises(ConfigError, match="event_type"):
        eventarc_fn.on_custom_event_published()
    with pytest.raises(ConfigError, match="type"):
        eventarc_fn.on_custom_event_published(event_type="t", filters={"type": "u"})
    with pytest.raises(ConfigError, match="channel"):
        eventarc_fn.on_custom_event_published(event_type="t", channel="a/b")


class LibraryEvent:
    """An event shaped like the cloudevents library's (get_attributes, get_data)."""

    def __init__(self, attributes: dict[str, str], data: Any) -> None:
        self._attributes, self._data = attributes, data

    def get_attributes(self) -> dict[str, str]:
        return dict(self._attributes)

    def get_data(self) -> Any:
        return self._data


def test_the_cloudevents_librarys_events_publish_too(
    default_app: App, seen: dict[str, list[CloudEvent[Any]]]
) -> None:
    attributes = {"type": "com.shop.order.v1.created", "source": "/shop", "region": "eu"}
    eventarc.channel().publish(LibraryEvent(attributes, {"n": 1}))
    default_app.drain()
    assert [e.data for e in seen["eu"]] == [{"n": 1}]
