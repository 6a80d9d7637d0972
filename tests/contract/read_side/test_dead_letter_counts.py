"""Dead-letter counts by function and by error group come from kept counters and a partial
index; they equal counting the rows, whatever made or ended the dead letters (bury, replay,
dismiss, a forgotten function)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.operations import deadletters
from oncefire.stores.base import error_group_of
from oncefire.testing import TestClock


def rows(app: App) -> list[tuple[str, str]]:
    """(function, error group) of every dead letter, paging through the whole list."""
    found: list[tuple[str, str]] = []
    before = None
    while page := app.dead_letters.list(limit=7, before=before):
        found += [(d.function, error_group_of(d.error)) for d in page]
        before = page[-1].id
    return found


def assert_counts_match_rows(app: App) -> None:
    listed = rows(app)
    assert app.dead_letters.count() == len(listed)
    by_function = Counter(f for f, _ in listed)
    by_group = Counter(listed)
    for function in ("charge", "ship", "bill"):
        assert app.dead_letters.count(function) == by_function[function]
        assert len(app.dead_letters.list(function, limit=1000)) == by_function[function]
        for group in {g for f, g in listed if f == function} | {"none such"}:
            n = by_group[(function, group)]
            assert app.dead_letters.count(function, error_group=group) == n
            assert len(app.dead_letters.list(function, limit=1000, error_group=group)) == n
            assert app.dead_letters.count(error_group=group) == sum(
                c for (_, g), c in by_group.items() if g == group
            )
    assert app.stats()["charge"].dead_letters == by_function["charge"]


def test_dead_letter_counts_by_function_and_group_equal_the_rows(
    app: App, clock: TestClock
) -> None:
    @app.on_document_created("orders/{o}", retry=False)
    def charge(event: Event) -> None:
        n = int(event.params["o"])
        if n % 3 == 0:
            raise ValueError(f"card declined\nfor order {n}")  # one group, many texts
        raise ConnectionError("gateway timeout")

    @app.on_document_created("shipments/{s}", retry=False)
    def ship(event: Event) -> None:
        raise KeyError("address")

    @app.on_document_created("invoices/{i}")
    def bill(event: Event) -> None: ...

    for n in range(20):
        app.db.document(f"orders/{n}").set({"n": n})
    for n in range(4):
        app.db.document(f"shipments/{n}").set({"n": n})
    app.drain()
    assert_counts_match_rows(app)
    declined = error_group_of("ValueError: card declined")
    assert app.dead_letters.count("charge", error_group=declined) == 7

    replayed = app.dead_letters.list("charge", limit=2)
    for d in replayed:
        app.dead_letters.replay(d.id)
    app.dead_letters.dismiss(app.dead_letters.list("ship", limit=1)[0].id)
    assert_counts_match_rows(app)
    app.drain()  # the replayed ones fail again: dead letters once more
    assert_counts_match_rows(app)

    assert app.dead_letters.dismiss_all("charge", error_group=declined) == 7
    assert app.dead_letters.replay_all(error_contains="address") == 3
    assert_counts_match_rows(app)
    for n in range(3):
        app.db.document(f"invoices/{n}").set({"n": n})
    assert app.functions.forget("bill") == 3  # its pending deliveries become dead letters
    assert_counts_match_rows(app)
    assert app.dead_letters.count("bill") == 3
    clock.advance(86400 * 400)
    app.purge()  # retention never touches a dead letter, nor their counts
    assert_counts_match_rows(app)


def test_forgetting_a_function_with_dead_letters_adds_its_backlog_to_their_count(
    app: App,
) -> None:
    """The bury of a forgotten function's backlog keeps the counter itself on PostgreSQL (one
    upsert, its row trigger off for the transaction): counted once, on top of the dead
    letters it had, and the trigger counts again in the transactions after it."""

    @app.on_document_created("orders/{o}", retry=False)
    def charge(event: Event) -> None:
        raise ValueError("card declined")

    for n in range(4):
        app.db.document(f"orders/{n}").set({"n": n})
    app.drain()
    for n in range(4, 9):
        app.db.document(f"orders/{n}").set({"n": n})
    assert app.functions.forget("charge") == 5
    assert_counts_match_rows(app)
    assert app.dead_letters.count("charge") == 9
    # Pending again, counted out by row (anyway: charge is no longer stored).
    assert app.dead_letters.replay_all("charge", anyway=True) == 9
    assert app.dead_letters.count("charge") == 0
    assert_counts_match_rows(app)


def test_a_bulk_replay_or_dismiss_goes_in_transactions_of_bulk_batch(
    app: App, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million dead letters replayed in one statement would hold the store's locks for
    the whole of it and, on PostgreSQL, grow one counter row's version chain quadratically."""

    @app.on_document_created("orders/{o}", retry=False)
    def charge(event: Event) -> None:
        raise ValueError("card declined")

    for n in range(7):
        app.db.document(f"orders/{n}").set({"n": n})
    app.drain()
    monkeypatch.setattr(deadletters, "BULK_BATCH", 3)
    store: Any = app.store
    sizes: list[int] = []
    for name in ("replay", "dismiss"):
        real = getattr(store, name)

        def noting(*args: Any, real: Any = real) -> int:
            sizes.append(len(args[-1]))  # the ids: one transaction each
            return int(real(*args))

        monkeypatch.setattr(store, name, noting)
    assert app.dead_letters.replay_all() == 7
    assert sizes == [3, 3, 1]
    app.drain()
    sizes.clear()
    assert app.dead_letters.dismiss_all() == 7
    assert sizes == [3, 3, 1]
    assert_counts_match_rows(app)
    assert app.dead_letters.count() == 0
