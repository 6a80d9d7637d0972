"""ordering_key=callable: the deliveries of one computed key (here a document's customer) run
one at a time in event order across documents, while other keys go on. Time moves only by
TestClock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App
from oncefire.engine.routing import Housekeeping, offer_unrouted
from oncefire.errors import ConfigError
from oncefire.events import Event
from oncefire.testing import TestClock


def by_customer(event: Event) -> Any:
    return event.data.after.get("customer")


def register(
    app: App,
    body: Callable[[Event], None] | None = None,
    key: Callable[[Event], Any] = by_customer,
    **options: Any,
) -> None:
    def log(event: Event) -> None:
        if body is not None:
            body(event)

    app.on_document_written("orders/{o}", ordering_key=key, **options)(log)


def lease(app: App, worker: str) -> list[tuple[str, int]]:
    """Key and lease what is due, as a worker's lease does; (customer, n) of each leased."""
    now = app.clock.now()
    functions = Housekeeping(app.runtime, ["log"]).leasable(["log"])
    taken = app.store.lease_due(
        worker=worker, now=now, lease_until=now + 30, limit=50, functions=functions, caps={}
    )
    return [
        (c.event.data["after"]["data"]["customer"], c.event.data["after"]["data"]["n"])
        for c in taken
    ]


def write(app: App, doc: str, customer: str, n: int) -> None:
    app.db.document(f"orders/{doc}").set({"customer": customer, "n": n})


def seen_by(seen: list[tuple[str, int]], customer: str) -> list[int]:
    return [n for c, n in seen if c == customer]


def test_a_lease_takes_only_the_oldest_unfinished_delivery_of_each_computed_key(
    app: App,
) -> None:
    register(app)
    # Two customers, each over several documents: the key is the customer, not the path.
    for n in range(3):
        write(app, f"a{n}", "ann", n)
        write(app, f"b{n}", "bob", n)
    assert sorted(lease(app, "w1")) == [("ann", 0), ("bob", 0)]
    assert lease(app, "w2") == []  # the heads run; the rest wait behind them


def test_deliveries_of_one_customer_run_in_order_across_documents(app: App) -> None:
    seen: list[tuple[str, int]] = []
    register(app, lambda e: seen.append((by_customer(e), e.data.after.get("n"))))
    for n in range(5):
        for customer in ("ann", "bob", "cy"):
            write(app, f"{customer}{n}", customer, n)
    assert app.drain().attempts == 15
    for customer in ("ann", "bob", "cy"):
        assert seen_by(seen, customer) == [0, 1, 2, 3, 4]


def test_a_failing_delivery_holds_back_its_customer_only(app: App, clock: TestClock) -> None:
    seen: list[tuple[str, int]] = []
    failed: set[str] = set()

    def body(event: Event) -> None:
        customer, n = by_customer(event), event.data.after.get("n")
        if customer == "ann" and n == 1 and event.id not in failed:
            failed.add(event.id)
            raise ValueError("declined once")
        seen.append((customer, n))

    register(app, body)
    for n in range(3):
        write(app, f"a{n}", "ann", n)  # one document each: only the key ties them
        write(app, f"b{n}", "bob", n)
    app.drain()
    assert seen_by(seen, "bob") == [0, 1, 2]
    assert seen_by(seen, "ann") == [0]  # 1 waits for its retry, 2 behind it
    clock.advance(60)
    app.drain()
    assert seen_by(seen, "ann") == [0, 1, 2]


def test_a_writer_that_does_not_register_the_function_still_orders_by_the_key(
    make_app: Callable[..., App],
) -> None:
    worker = make_app()
    register(worker)
    assert worker.store  # registered in the store before the writer writes
    writer = make_app()  # the CLI, or another service: it has no ordering_key callable
    for n in range(3):
        write(writer, f"a{n}", "ann", n)
    write(writer, "b0", "bob", 0)
    assert sorted(lease(worker, "w1")) == [("ann", 0), ("bob", 0)]


def test_events_written_before_the_function_existed_are_keyed_when_routed(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    writer = make_app()
    for n in range(3):
        write(writer, f"a{n}", "ann", n)
        write(writer, f"b{n}", "bob", n)
    assert writer.unrouted_count() == 6
    clock.advance(60)
    worker = make_app()
    register(worker)
    assert offer_unrouted(worker.runtime)[0] == 6  # what a worker's sweep does
    assert sorted(lease(worker, "w1")) == [("ann", 0), ("bob", 0)]


def test_an_int_key_is_taken_as_its_text(app: App) -> None:
    register(app, key=lambda e: 7)  # every customer under one key
    write(app, "a0", "ann", 0)
    write(app, "b0", "bob", 0)
    assert lease(app, "w1") == [("ann", 0)]


@pytest.mark.parametrize(
    ("key", "error"),
    [
        (lambda e: e.data.after.to_dict()["missing"], "ordering_key raised KeyError: 'missing'"),
        (lambda e: None, "ordering_key returned None: it must return a non-empty str"),
        (lambda e: "", "ordering_key returned '': it must return a non-empty str"),
        (lambda e: 1.5, "ordering_key returned 1.5"),
    ],
)
def test_a_key_that_cannot_be_computed_makes_a_dead_letter_and_others_go_on(
    make_app: Callable[..., App], key: Callable[[Event], Any], error: str
) -> None:
    app = make_app()
    seen: list[str] = []

    def key_of(event: Event) -> Any:
        return key(event) if by_customer(event) == "ann" else by_customer(event)

    register(app, lambda e: seen.append(by_customer(e)), key=key_of)
    write(app, "a0", "ann", 0)
    write(app, "b0", "bob", 0)
    app.drain()
    assert seen == ["bob"]
    (dead,) = app.dead_letters.list()
    assert error in (dead.error or "")
    assert dead.function == "log"

    fixed = make_app()  # the fix deployed: replay keys the delivery again and runs it
    register(fixed, lambda e: seen.append(by_customer(e)))
    fixed.dead_letters.replay(dead.id)
    fixed.drain()
    assert seen == ["bob", "ann"]


def test_deliveries_left_without_a_key_run_once_the_function_is_no_longer_keyed(
    make_app: Callable[..., App],
) -> None:
    first = make_app()
    register(first)
    for n in range(3):
        write(first, f"a{n}", "ann", n)  # written, never leased: no key computed yet
    second = make_app()
    second.on_document_written("orders/{o}", name="log")(lambda e: None)
    assert second.drain().attempts == 3


def test_ordering_key_options_are_checked_at_registration() -> None:
    app = App("sqlite://:memory:")
    with pytest.raises(ConfigError, match="not both"):
        app.on_document_written("orders/{o}", ordering="document", ordering_key=by_customer)
    with pytest.raises(ConfigError, match="ordering_key='customer' is not a plain function"):
        app.on_document_written("orders/{o}", ordering_key="customer")

    async def key(event: Event) -> str:
        return "k"

    with pytest.raises(ConfigError, match="is not a plain function"):
        app.on_document_written("orders/{o}", ordering_key=key)
