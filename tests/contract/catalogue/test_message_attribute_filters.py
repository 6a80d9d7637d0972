"""on_message(topic, attributes={...}): a message starts the function only if it carries each
of those attribute values; the filter is kept in the store, so every writer routes by it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App, ConfigError
from oncefire.events import Event
from oncefire.testing import TestClock


def test_a_filtered_function_gets_only_the_messages_that_carry_its_attributes(
    app: App,
) -> None:
    seen: dict[str, list[Any]] = {"created": [], "eu": [], "all": []}

    @app.on_message("orders", attributes={"type": "created"})
    def created(event: Event) -> None:
        seen["created"].append(event.data.data)

    @app.on_message("orders", attributes={"type": "created", "region": "eu"})
    def eu(event: Event) -> None:
        seen["eu"].append(event.data.data)

    @app.on_message("orders")
    def every(event: Event) -> None:
        seen["all"].append(event.data.data)

    app.publish("orders", 1, attributes={"type": "created", "region": "eu"})
    app.publish("orders", 2, attributes={"type": "created", "region": "us"})
    app.publish("orders", 3, attributes={"type": "deleted", "region": "eu"})
    app.publish("orders", 4)
    app.drain()
    assert seen == {"created": [1, 2], "eu": [1], "all": [1, 2, 3, 4]}
    assert app.stats()["eu"].succeeded == 1  # no delivery at all for the others


def test_a_writer_without_the_function_routes_by_the_stored_filter(
    make_app: Callable[..., App],
) -> None:
    seen: list[Any] = []
    app = make_app()

    @app.on_message("orders", attributes={"type": "created"})
    def created(event: Event) -> None:
        seen.append(event.data.data)

    app.store  # noqa: B018 registers the function
    writer = make_app()  # another process, say: it knows the function from the store only
    writer.publish("orders", 1, attributes={"type": "created"})
    writer.publish("orders", 2, attributes={"type": "deleted"})
    assert writer.unrouted_count() == 1  # kept for a function that may take it later
    app.drain()
    assert seen == [1]


def test_a_declined_message_goes_to_a_matching_function_registered_later(
    make_app: Callable[..., App],
) -> None:
    first = make_app()

    @first.on_message("orders", attributes={"type": "created"})
    def created(event: Event) -> None: ...

    first.publish("orders", 2, attributes={"type": "deleted"})
    first.drain()
    seen: list[Any] = []
    later = make_app()

    @later.on_message("orders", attributes={"type": "deleted"})
    def deleted(event: Event) -> None:
        seen.append(event.data.data)

    later.drain()
    assert seen == [2]
    assert later.unrouted_count() == 0


def test_a_dead_letter_topic_forwards_only_to_functions_its_message_matches(
    app: App, clock: TestClock
) -> None:
    seen: list[str] = []

    @app.on_message("orders", retry=False, dead_letter_topic="failed")
    def fails(event: Event) -> None:
        raise ValueError("no")

    @app.on_message("failed", attributes={"oncefire.source_function": "other"})
    def elsewhere(event: Event) -> None:
        seen.append("elsewhere")

    app.publish("orders", 1)
    app.drain()
    app.drain()
    assert seen == []
    [letter] = app.dead_letters.list()
    assert "nothing subscribes to dead-letter topic failed" in (letter.error or "")


@pytest.mark.parametrize(
    "attributes",
    [{}, {"": "x"}, {"k": 1}, {1: "x"}, ["k", "v"], {"k": "a\x00b"}],
)
def test_a_bad_attribute_filter_is_a_config_error(app: App, attributes: Any) -> None:
    with pytest.raises(ConfigError, match=r"\.$"):

        @app.on_message("orders", attributes=attributes)
        def fn(event: Event) -> None: ...

    assert "fn" not in app.triggers
