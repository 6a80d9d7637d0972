"""Bounded dead-letter counts. app.dead_letters.search: a search by error text reads a window
of a function's newest dead letters, never all of them; its count is exact when it read them
all and a lower bound (said so) when it did not, and searching on from next_before finds every
match once. app.dead_letters.count_group: a group's count stops at a cap and says so."""

from __future__ import annotations

import pytest

from oncefire import App, ConfigError
from oncefire.events import Event
from oncefire.operations.deadletters import BoundedCount


def bury_orders(app: App, n: int) -> None:
    """n dead letters of `charge`: orders divisible by 3 declined, the others timed out;
    and 4 of `ship`, all declined (another function: never counted for charge)."""

    @app.on_document_created("orders/{o}", name="charge", retry=False)
    def charge(event: Event) -> None:
        number = int(event.params["o"])
        if number % 3 == 0:
            raise ValueError(f"card declined\nfor order {number}")
        raise TimeoutError("gateway timeout")

    @app.on_document_created("shipments/{s}", name="ship", retry=False)
    def ship(event: Event) -> None:
        raise ValueError("card declined")

    for number in range(n):
        app.db.document(f"orders/{number}").set({"n": number})
    for number in range(4):
        app.db.document(f"shipments/{number}").set({"n": number})
    app.drain()


def test_a_search_wider_than_the_dead_letters_is_exact(app: App) -> None:
    bury_orders(app, 20)
    found = app.dead_letters.search("charge", "declined", window=100)
    assert (found.count, found.searched, found.is_lower_bound) == (7, 20, False)
    assert found.next_before is None
    assert found.count == app.dead_letters.count("charge", error_contains="declined")
    assert [d.id for d in found.items] == [
        d.id for d in app.dead_letters.list("charge", 100, error_contains="declined")
    ]
    assert all("declined" in (d.error or "") for d in found.items)


def test_a_search_reads_only_its_window_and_says_its_count_is_a_lower_bound(app: App) -> None:
    bury_orders(app, 20)
    newest = app.dead_letters.list("charge", 20)
    found = app.dead_letters.search("charge", "declined", window=6, limit=1)
    window = newest[:6]
    assert found.searched == 6 and found.is_lower_bound
    assert found.count == sum("declined" in (d.error or "") for d in window)
    assert found.count < app.dead_letters.count("charge", error_contains="declined")
    assert found.next_before == window[-1].id
    assert [d.id for d in found.items] == [d.id for d in window if "declined" in (d.error or "")][
        :1
    ]


def test_searching_on_from_next_before_finds_every_match_once(app: App) -> None:
    bury_orders(app, 20)
    seen: list[int] = []
    counts: list[int] = []
    before = None
    while True:
        found = app.dead_letters.search("charge", "declined", window=6, before=before)
        seen += [d.id for d in found.items]
        counts.append(found.count)
        if not found.is_lower_bound:
            break
        before = found.next_before
    assert counts == [2, 2, 2, 1]  # windows of 6, 6, 6 and the last 2 dead letters
    every = app.dead_letters.list("charge", 100, error_contains="declined")
    assert seen == [d.id for d in every] and len(seen) == 7


def test_a_window_that_ends_at_the_oldest_dead_letter_is_exact(app: App) -> None:
    bury_orders(app, 6)
    found = app.dead_letters.search("charge", "timeout", window=6)
    assert (found.count, found.searched, found.is_lower_bound) == (4, 6, False)
    empty = app.dead_letters.search("bill", "timeout")
    assert (empty.count, empty.searched, empty.is_lower_bound, empty.items) == (0, 0, False, [])


def test_a_search_needs_a_text_and_a_sane_window(app: App) -> None:
    bury_orders(app, 3)
    for bad in ({"error_contains": ""}, {"window": 0}, {"limit": 0}):
        arguments = {"function": "charge", "error_contains": "x", **bad}
        with pytest.raises(ConfigError):
            app.dead_letters.search(**arguments)  # type: ignore[arg-type]


def test_a_group_count_is_exact_up_to_its_cap_and_a_lower_bound_past_it(app: App) -> None:
    bury_orders(app, 20)
    declined = "ValueError: card declined"
    exact = app.dead_letters.count("charge", error_group=declined)
    assert exact == 7
    for cap, expected in ((100, (7, False)), (7, (7, False)), (6, (6, True)), (1, (1, True))):
        counted = app.dead_letters.count_group("charge", declined, cap=cap)
        assert (counted.count, counted.is_lower_bound) == expected, cap
    assert app.dead_letters.count_group("ship", declined, cap=3) == BoundedCount(3, True)
    assert app.dead_letters.count_group("charge", "no such") == BoundedCount(0, False)
    with pytest.raises(ConfigError):
        app.dead_letters.count_group("charge", declined, cap=0)
