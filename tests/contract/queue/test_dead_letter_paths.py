"""Where an exhausted delivery goes: a dead letter that keeps its full payload (even when it
was too large for the retry queue), or a dead-letter topic only when something receives it."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from oncefire import App
from oncefire.errors import DeadLetterNotFoundError
from oncefire.events import Event
from oncefire.retry import PAYLOAD_TOO_LARGE
from oncefire.testing import TestClock


def test_an_exhausted_message_whose_dead_letter_topic_has_no_subscriber_is_a_dead_letter(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.on_message("payments", retry=False, dead_letter_topic="payments-dlq")
    def on_payment(event: Event) -> None:
        raise ValueError("card declined")

    message_id = app.publish("payments", {"amount": 5})
    with caplog.at_level(logging.INFO, logger="oncefire"):
        app.drain()
    [letter] = app.dead_letters.list()
    assert letter.event_id == message_id
    assert "card declined" in (letter.error or "")
    assert "payments-dlq" in (letter.error or "")  # the reason it was not forwarded
    assert app.store.delivery_states(message_id) == [("on_payment", "dead", 1)]
    assert "forwarded" not in caplog.text
    app.dead_letters.replay(letter.id)  # replayable, like any dead letter
    assert app.store.delivery_states(message_id) == [("on_payment", "pending", 0)]


def test_the_log_says_forwarded_to_the_topic_when_something_received_it(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.on_message("payments", retry=False, dead_letter_topic="payments-dlq")
    def on_payment(event: Event) -> None:
        raise ValueError("card declined")

    @app.on_message("payments-dlq")
    def on_parked(event: Event) -> None:
        pass

    app.publish("payments", {"amount": 5})
    with caplog.at_level(logging.INFO, logger="oncefire"):
        app.drain()
    assert "forwarded to topic payments-dlq" in caplog.text
    assert "; dead letter" not in caplog.text
    assert app.dead_letters.count() == 0


@pytest.fixture
def small_app(make_app: Callable[..., App]) -> App:
    """An app whose retry queue takes payloads up to 1,000 bytes."""
    return make_app(max_payload_bytes=1000)


def _doc_of_size(app: App, size: int) -> dict[str, str]:
    """Document data whose created event is exactly `size` bytes of JSON."""
    probe = App("sqlite://:memory:", clock=TestClock(app.clock.now()))
    sizes: list[int] = []

    @probe.on_document_created("orders/{o}")
    def measure(event: Event) -> None:
        sizes.append(event.size)

    probe.db.document("orders/o1").set({"blob": ""})
    probe.drain()
    probe.close()
    return {"blob": "x" * (size - sizes[0])}


@pytest.mark.parametrize(("extra", "is_oversized"), [(0, False), (1, True)])
def test_the_payload_limit_holds_at_the_limit_and_one_byte_over(
    small_app: App, clock: TestClock, extra: int, is_oversized: bool
) -> None:
    attempts: list[int] = []

    @small_app.on_document_created("orders/{o}")
    def charge(event: Event) -> None:
        attempts.append(event.attempt)
        assert event.size == 1000 + extra
        raise ValueError("declined")

    small_app.db.document("orders/o1").set(_doc_of_size(small_app, 1000 + extra))
    small_app.drain()
    clock.advance(120)
    small_app.drain()
    if is_oversized:
        assert attempts == [1]
        [letter] = small_app.dead_letters.list()
        assert (letter.error or "").startswith(PAYLOAD_TOO_LARGE)
    else:
        assert attempts == [1, 2]
        assert small_app.dead_letters.count() == 0


def test_the_preview_of_an_oversized_dead_letter_hides_its_secrets(small_app: App) -> None:
    @small_app.on_document_created("orders/{o}")
    def charge(event: Event) -> None:
        raise ValueError("declined")

    # First on both stores (PostgreSQL's jsonb orders keys by length), so within the preview.
    small_app.db.document("orders/o1").set({"password": "hunter2", "long_blob_text": "x" * 5000})
    small_app.drain()
    [letter] = small_app.dead_letters.list()
    shown = small_app.dead_letters.get(letter.id)
    for preview in (letter, shown):
        assert preview.truncated and "hunter2" not in str(preview.to_dict())
        assert '"password":"[redacted]"' in preview.payload["truncated"]
    full = small_app.dead_letters.get(letter.id, full=True)  # the store keeps it as written
    assert full.payload["after"]["data"]["password"] == "hunter2"


def test_an_oversized_dead_letter_keeps_its_full_payload_and_replays_with_it(
    small_app: App, clock: TestClock
) -> None:
    seen: list[str] = []
    is_broken = [True]

    @small_app.on_document_created("orders/{o}")
    def charge(event: Event) -> None:
        seen.append(event.data.to_dict()["blob"])
        if is_broken[0]:
            raise ValueError("declined")

    big = "x" * 5000
    small_app.db.document("orders/o1").set({"blob": big})
    small_app.drain()
    [letter] = small_app.dead_letters.list()
    assert letter.truncated  # shown truncated
    assert big not in str(letter.payload)
    assert len(str(letter.payload)) < 2000
    full = small_app.dead_letters.get(letter.id, full=True)
    assert not full.truncated
    assert full.payload["after"]["data"]["blob"] == big
    is_broken[0] = False
    small_app.dead_letters.replay(letter.id)
    small_app.drain()
    assert seen == [big, big]
    assert small_app.dead_letters.count() == 0


def test_replay_all_replays_oversized_dead_letters_too(small_app: App, clock: TestClock) -> None:
    runs: list[int] = []

    @small_app.on_document_created("orders/{o}", retry=False)
    def charge(event: Event) -> None:
        runs.append(len(event.data.to_dict()["blob"]))
        if len(runs) == 1:
            raise ValueError("declined")

    small_app.db.document("orders/o1").set({"blob": "y" * 3000})
    small_app.drain()
    assert small_app.dead_letters.replay_all() == 1
    small_app.drain()
    assert runs == [3000, 3000]


@pytest.mark.parametrize("letter_id", [10**20, -1, 0, "99999999999999999999"])
def test_an_id_no_store_can_hold_is_not_found(app: App, letter_id: object) -> None:
    with pytest.raises(DeadLetterNotFoundError):
        app.dead_letters.get(letter_id)  # type: ignore[arg-type]
    with pytest.raises(DeadLetterNotFoundError):
        app.dead_letters.dismiss(letter_id)  # type: ignore[arg-type]
