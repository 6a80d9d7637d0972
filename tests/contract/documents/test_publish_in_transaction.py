"""tx.publish and app.publish inside db.transaction(): the message commits with the writes,
or not at all."""

from __future__ import annotations

import pytest

from oncefire import App
from oncefire.events import Event


@pytest.fixture
def received(app: App) -> list[Event]:
    """Messages on topic `emails` that reached a function."""
    seen: list[Event] = []

    @app.on_message("emails")
    def send(event: Event) -> None:
        seen.append(event)

    return seen


def test_tx_publish_commits_with_the_transaction(app: App, received: list[Event]) -> None:
    with app.db.transaction() as tx:
        tx.set(app.db.document("orders/o1"), {"amount": 5})
        message_id = tx.publish("emails", {"to": "a@b"}, {"kind": "receipt"})
    app.drain()
    [event] = received
    assert event.id == message_id
    assert event.data.data == {"to": "a@b"}
    assert event.data.attributes == {"kind": "receipt"}


def test_tx_publish_rolls_back_with_the_transaction(app: App, received: list[Event]) -> None:
    with pytest.raises(RuntimeError), app.db.transaction() as tx:
        tx.set(app.db.document("orders/o1"), {"amount": 5})
        tx.publish("emails", {"to": "a@b"})
        raise RuntimeError("abort")
    app.drain()
    assert received == []
    assert not app.db.document("orders/o1").get().exists


def test_app_publish_joins_the_open_transaction(app: App, received: list[Event]) -> None:
    with pytest.raises(RuntimeError), app.db.transaction() as tx:
        tx.set(app.db.document("orders/o1"), {"amount": 5})
        app.publish("emails", {"to": "a@b"})
        raise RuntimeError("abort")
    app.drain()
    assert received == []
    with app.db.transaction() as tx:
        tx.set(app.db.document("orders/o2"), {"amount": 5})
        message_id = app.publish("emails", {"to": "c@d"})
    app.drain()
    assert [e.id for e in received] == [message_id]
