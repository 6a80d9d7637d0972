"""Self-trigger loop protection: events written inside a function carry their lineage, and a
chain that reaches max_event_depth is stopped with a dead letter naming its root event."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncefire import App, Increment
from oncefire.events import Event
from oncefire.testing import TestClock

RUNAWAY = 40  # more runs than any test expects: a loop the protection missed


def test_a_self_writing_update_trigger_is_stopped_at_depth_16(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    seen: list[str] = []

    @app.on_document_updated("counters/{c}")
    def bump(event: Event) -> None:
        seen.append(event.id)
        if len(seen) > RUNAWAY:
            return  # the protection failed: end the loop so the test fails, not hangs
        after = event.data.after.to_dict()
        app.db.document(event.source).set({"n": after["n"] + 1})  # the one-statement path

    ref = app.db.document("counters/c")
    ref.set({"n": 0})
    ref.set({"n": 1})  # an update written outside any function: the root of the chain
    app.drain()

    assert len(seen) == 16  # depths 0 to 15 ran; the event at depth 16 did not
    assert ref.get().to_dict() == {"n": 17}  # the stopping write itself committed
    (letter,) = app.dead_letters.list()
    assert letter.function == "bump"
    assert letter.error == f"recursive loop stopped at depth 16 (root event {seen[0]})"
    assert letter.attempts == 0
    stopped = app.history.event(letter.event_id)
    assert (stopped.root_id, stopped.depth) == (seen[0], 16)
    first = app.history.event(seen[0])
    assert (first.root_id, first.depth) == (None, 0)  # written outside any function
    assert [app.history.event(i).depth for i in seen] == list(range(16))


def test_a_loop_dead_letter_is_replayed_and_dismissed_like_any_other(
    make_app: Callable[..., App],
) -> None:
    app = make_app(max_event_depth=3)
    runs: list[int] = []

    @app.on_document_updated("counters/{c}")
    def bump(event: Event) -> None:
        runs.append(event.attempt)
        if len(runs) > RUNAWAY:
            return
        app.db.document(event.source).update({"n": Increment(1)})

    ref = app.db.document("counters/c")
    ref.set({"n": 0})
    ref.update({"n": 1})
    app.drain()
    assert len(runs) == 3
    (letter,) = app.dead_letters.list()
    assert "recursive loop stopped at depth 3" in (letter.error or "")

    app.dead_letters.replay(letter.id)  # a person runs it anyway: it runs once
    app.drain()
    assert len(runs) == 4
    (again,) = app.dead_letters.list()
    assert "recursive loop stopped at depth 4" in (again.error or "")
    app.dead_letters.dismiss(again.id)
    assert app.dead_letters.count() == 0
    assert ref.get().to_dict() == {"n": 5}


def test_a_chain_a_b_a_is_stopped_at_depth_16(make_app: Callable[..., App]) -> None:
    app = make_app()
    ran: list[tuple[str, str]] = []

    @app.on_document_updated("orders/{o}")
    def a(event: Event) -> None:
        ran.append(("a", event.id))
        app.db.document(f"mirrors/{event.params['o']}").set(event.data.after.to_dict())

    @app.on_document_written("mirrors/{o}")
    def b(event: Event) -> None:
        ran.append(("b", event.id))
        if len(ran) > RUNAWAY:
            return
        with app.db.transaction() as tx:
            ref = app.db.document(f"orders/{event.params['o']}")
            tx.update(ref, {"n": Increment(1)})

    app.db.document("orders/o1").set({"n": 0})
    app.db.document("orders/o1").update({"n": 1})
    app.drain()

    assert [name for name, _ in ran] == ["a", "b"] * 8
    (letter,) = app.dead_letters.list()
    assert letter.function == "a"
    assert letter.error == f"recursive loop stopped at depth 16 (root event {ran[0][1]})"


def test_a_function_writing_a_different_document_once_is_not_affected(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    audited: list[str] = []

    @app.on_document_created("orders/{o}")
    def charge(event: Event) -> None:
        app.db.document(f"receipts/{event.params['o']}").set({"charged": True})
        app.publish("charged", {"order": event.params["o"]})

    @app.on_document_created("receipts/{r}")
    def receipt(event: Event) -> None:
        audited.append(event.source)

    @app.on_message("charged")
    def notify(event: Event) -> None:
        audited.append(event.data.data["order"])

    for i in range(3):
        app.db.document(f"orders/o{i}").set({"amount": i})
    app.drain()
    assert sorted(audited) == ["o0", "o1", "o2", "receipts/o0", "receipts/o1", "receipts/o2"]
    assert app.dead_letters.count() == 0


def test_the_lineage_survives_a_retry(make_app: Callable[..., App], clock: TestClock) -> None:
    app = make_app(max_event_depth=2)
    attempts: list[int] = []

    @app.on_document_created("a/{x}")
    def first(event: Event) -> None:
        app.db.document(f"b/{event.params['x']}").set({"hop": 1})  # depth 1

    @app.on_document_created("b/{x}")
    def second(event: Event) -> None:
        attempts.append(event.attempt)
        if event.attempt == 1:
            raise RuntimeError("flaky")
        app.db.document(f"c/{event.params['x']}").set({"hop": 2})  # depth 2: stopped

    @app.on_document_created("c/{x}")
    def third(event: Event) -> None:
        raise AssertionError("a depth-2 event must not run at max_event_depth=2")

    app.db.document("a/x").set({"hop": 0})
    app.drain()
    clock.advance(120)  # past the first retry delay
    app.drain()
    assert attempts == [1, 2]
    (letter,) = app.dead_letters.list()
    assert letter.function == "third"
    assert "recursive loop stopped at depth 2 (root event " in (letter.error or "")
    assert app.db.document("c/x").get().exists


def test_an_async_self_writing_trigger_is_stopped(make_app: Callable[..., App]) -> None:
    app = make_app(max_event_depth=4)
    runs: list[str] = []

    @app.on_document_updated("counters/{c}")
    async def bump(event: Event) -> None:
        runs.append(event.id)
        if len(runs) > RUNAWAY:
            return
        app.publish("ticks", {"n": len(runs)})
        app.db.document(event.source).update({"n": Increment(1)})

    ref = app.db.document("counters/c")
    ref.set({"n": 0})
    ref.update({"n": 1})
    app.drain()
    assert len(runs) == 4
    (letter,) = app.dead_letters.list()
    assert letter.error == f"recursive loop stopped at depth 4 (root event {runs[0]})"


def test_max_event_depth_must_be_positive(store_url: str) -> None:
    from oncefire.errors import ConfigError

    with pytest.raises(ConfigError, match="max_event_depth"):
        App(store_url, max_event_depth=0)


def test_a_function_republishing_its_own_topic_is_stopped(make_app: Callable[..., App]) -> None:
    app = make_app()
    hops: list[int] = []

    @app.on_message("ping")
    def pong(event: Event) -> None:
        hops.append(event.data.json["hop"])
        if len(hops) > RUNAWAY:
            return
        app.publish("ping", {"hop": hops[-1] + 1})

    root = app.publish("ping", {"hop": 0})
    app.drain()
    assert hops == list(range(16))
    (letter,) = app.dead_letters.list()
    assert letter.function == "pong"
    assert letter.error == f"recursive loop stopped at depth 16 (root event {root})"
    assert letter.payload == {"data": {"hop": 16}, "attributes": {}}  # kept for a replay


def test_a_loop_through_tx_publish_and_a_document_is_stopped(
    make_app: Callable[..., App],
) -> None:
    app = make_app(max_event_depth=6)
    ran: list[str] = []

    @app.on_document_written("carts/{c}")
    def announce(event: Event) -> None:
        ran.append("announce")
        if len(ran) > RUNAWAY:
            return
        with app.db.transaction() as tx:
            tx.publish("cart-changed", {"cart": event.params["c"]})

    @app.on_message("cart-changed")
    def touch(event: Event) -> None:
        ran.append("touch")
        app.db.document(f"carts/{event.data.json['cart']}").update({"seen": Increment(1)})

    app.db.document("carts/c1").set({"seen": 0})
    app.drain()
    assert ran == ["announce", "touch"] * 3
    (letter,) = app.dead_letters.list()
    assert letter.function == "announce"
    assert "recursive loop stopped at depth 6 (root event " in (letter.error or "")
    assert app.db.document("carts/c1").get().to_dict() == {"seen": 3}


def test_a_write_outside_any_function_starts_a_new_chain(make_app: Callable[..., App]) -> None:
    app = make_app(max_event_depth=2)
    runs: list[str] = []

    @app.on_document_updated("counters/{c}")
    def bump(event: Event) -> None:
        runs.append(event.id)
        if len(runs) > RUNAWAY:
            return
        app.db.document(event.source).update({"n": Increment(1)})

    ref = app.db.document("counters/c")
    ref.set({"n": 0})
    for _ in range(3):  # each outside write is a root: its chain gets the full depth
        ref.update({"n": Increment(1)})
        app.drain()
    assert len(runs) == 6
    assert app.dead_letters.count() == 3


def test_a_loop_through_a_dead_letter_topic_is_stopped(make_app: Callable[..., App]) -> None:
    app = make_app(max_event_depth=6)
    runs: list[str] = []

    @app.on_message("jobs", retry=False, dead_letter_topic="jobs-dead")
    def work(event: Event) -> None:
        runs.append("work")
        raise ValueError("always fails")

    @app.on_message("jobs-dead")
    def resubmit(event: Event) -> None:  # puts every failed message back: a loop
        runs.append("resubmit")
        if len(runs) > RUNAWAY:
            return
        app.publish("jobs", event.data.json)

    app.publish("jobs", {"n": 1})
    app.drain()
    # jobs (0) -> jobs-dead (1, forwarded) -> jobs (2) -> ... -> jobs (6): stopped
    assert runs == ["work", "resubmit"] * 3
    (letter,) = app.dead_letters.list()
    assert letter.function == "work"
    assert "recursive loop stopped at depth 6 (root event " in (letter.error or "")
