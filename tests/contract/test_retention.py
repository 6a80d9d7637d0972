"""Retention (docs/retention.md): what each rule purges, and what is never purged."""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing

import pytest

from oncefire import App, PermanentError, idempotent
from oncefire.engine.worker import Worker
from oncefire.errors import ConfigError, EventNotFoundError
from oncefire.events import Event
from oncefire.features import retention
from oncefire.features.retention import purge_step
from oncefire.testing import TestClock

DAY = 86400.0
WEEK = 7 * DAY


def is_stored(app: App, event_id: str) -> bool:
    try:
        app.history.event(event_id)
    except EventNotFoundError:
        return False
    return True


def test_succeeded_deliveries_their_attempts_and_events_go_after_seven_days(
    app: App, clock: TestClock
) -> None:
    seen: list[str] = []

    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None:
        seen.append(event.id)

    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(WEEK - 1)
    assert app.purge().total() == 0
    assert is_stored(app, seen[0])
    clock.advance(2)
    counts = app.purge()
    assert (counts.deliveries, counts.attempts, counts.events) == (1, 1, 1)
    assert not is_stored(app, seen[0])
    assert app.db.document("orders/o1").get().exists  # documents are the user's, never purged
    assert app.stats(window=30 * DAY)["ship"].succeeded == 1  # the buckets outlive the rows


def test_an_event_stays_while_any_delivery_of_it_is_unfinished(app: App, clock: TestClock) -> None:
    seen: list[str] = []
    is_up = False

    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None:
        seen.append(event.id)

    @app.on_document_created("orders/{o}", retry=True)
    def bill(event: Event) -> None:
        if not is_up:
            raise ConnectionError("billing down")

    app.db.document("orders/o1").set({"n": 1})
    app.drain()  # ship succeeds; bill fails and waits for its retry
    clock.advance(4 * WEEK)  # bill is due again, and pending: never purged
    counts = app.purge()
    assert (counts.deliveries, counts.attempts, counts.events) == (1, 1, 0)
    history = app.history.event(seen[0])
    assert [d["function"] for d in history.deliveries] == ["bill"]
    is_up = True
    app.drain()  # bill succeeds now; its event goes a week after that
    clock.advance(WEEK - 1)
    assert app.purge().events == 0
    clock.advance(2)
    counts = app.purge()
    assert (counts.deliveries, counts.attempts, counts.events) == (1, 2, 1)
    assert not is_stored(app, seen[0])


def test_dead_letters_are_never_purged_until_replayed_or_dismissed(
    app: App, clock: TestClock
) -> None:
    is_up = False

    @app.on_document_created("orders/{o}", retry=False)
    def charge(event: Event) -> None:
        if not is_up:
            raise PermanentError("card declined")

    for n in range(3):
        app.db.document(f"orders/o{n}").set({"n": n})
    app.drain()
    clock.advance(365 * DAY)
    app.drain()  # a worker's maintenance step purges too
    assert app.purge().total() == 0
    assert app.dead_letters.count() == 3
    first, second, third = app.dead_letters.list()
    assert is_stored(app, first.event_id)
    is_up = True
    app.dead_letters.replay(first.id)  # replayed: it succeeds, then ages like any other
    app.drain()
    app.dead_letters.dismiss(second.id)  # dismissed: its attempts and its event go with it
    assert not is_stored(app, second.event_id)
    clock.advance(WEEK + 1)
    counts = app.purge()
    assert (counts.deliveries, counts.attempts, counts.events) == (1, 2, 1)
    assert app.dead_letters.count() == 1
    assert (app.dead_letters.get(third.id).error or "").startswith("PermanentError: card declined")
    assert is_stored(app, third.event_id)


def test_claims_and_idempotent_records_go_only_after_their_ttl(app: App, clock: TestClock) -> None:
    @app.on_message("mails")
    @idempotent(ttl=2 * DAY)
    def send(event: Event) -> str:
        return "sent"

    with app.db.transaction() as tx:
        assert tx.claim("order-1", ttl=DAY)
    app.publish("mails", {"to": "a"})
    app.drain()
    clock.advance(DAY - 1)
    assert app.purge(dry_run=True).claims == 0
    assert app.purge().claims == 0
    with app.db.transaction() as tx:
        assert not tx.claim("order-1")  # still within its TTL
    clock.advance(2)
    assert app.purge().claims == 1  # the claim; the record is kept for its own TTL
    clock.advance(DAY)
    assert app.purge().claims == 1
    with app.db.transaction() as tx:
        assert tx.claim("order-1")


def test_unrouted_events_go_after_their_window(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(unrouted_retention=DAY)
    app.publish("nobody", {"n": 1})
    clock.advance(DAY - 1)
    assert app.purge().unrouted == 0
    assert app.unrouted_count() == 1
    clock.advance(2)
    assert app.purge(dry_run=True).unrouted == 1
    assert app.purge().unrouted == 1
    assert app.unrouted_count() == 0


def test_statistics_buckets_go_after_their_retention(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(statistics_retention=30 * DAY)

    @app.on_message("mails")
    def send(event: Event) -> None: ...

    app.publish("mails", {"n": 1})
    app.drain()
    clock.advance(29 * DAY)
    app.purge()
    assert app.stats(window=60 * DAY)["send"].succeeded == 1
    clock.advance(2 * DAY)
    assert app.purge().buckets == 1
    assert app.stats(window=60 * DAY)["send"].succeeded == 0


def test_a_dry_run_counts_what_a_purge_deletes_and_changes_nothing(
    app: App, clock: TestClock
) -> None:
    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None: ...

    @app.on_document_created("orders/{o}", retry=False)
    def bill(event: Event) -> None:
        raise PermanentError("no")

    for n in range(5):
        app.db.document(f"orders/o{n}").set({"n": n})
    app.publish("nobody", {"n": 1})
    with app.db.transaction() as tx:
        tx.claim("k", ttl=60)
    app.drain()
    clock.advance(8 * WEEK)
    planned = app.purge(dry_run=True)
    assert planned.is_dry_run
    assert planned.to_dict() == app.purge(dry_run=True).to_dict()  # nothing changed
    # ship's deliveries and attempts; no event (bill's dead letters hold them); the claim;
    # the unrouted event. Buckets are kept 90 days.
    assert planned.to_dict() == {
        "deliveries": 5,
        "attempts": 5,
        "events": 0,
        "claims": 1,
        "unrouted": 1,
        "dedupe_hits": 0,
        "buckets": 0,
    }
    assert app.purge().to_dict() == planned.to_dict()
    assert app.purge(dry_run=True).total() == 0
    assert app.dead_letters.count() == 5


def test_workers_purge_in_batches_of_purge_batch_rows(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(purge_batch=2)

    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None: ...

    for n in range(5):
        app.db.document(f"orders/o{n}").set({"n": n})
    app.drain()
    clock.advance(WEEK + 1)
    assert purge_step(app.runtime, batches=1).deliveries == 2  # one batch of two
    assert purge_step(app.runtime, batches=2).deliveries == 3  # two batches: two, then the last one
    assert purge_step(app.runtime).total() == 0


def test_a_step_takes_a_batch_of_each_kind_in_turn_so_no_backlog_starves_another(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(purge_batch=2)

    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None: ...

    for n in range(6):
        app.db.document(f"orders/o{n}").set({"n": n})
        with app.db.transaction() as tx:
            assert tx.claim(f"order-{n}", ttl=DAY)
    app.drain()
    clock.advance(WEEK + 1)
    # Out of time at once, a step still takes a batch of each kind, not only of the first.
    first = purge_step(app.runtime, seconds=0.0)
    assert (first.deliveries, first.claims) == (2, 2)
    rest = purge_step(app.runtime)  # with time left, rounds until nothing is left
    assert (rest.deliveries, rest.claims) == (4, 4)


def test_a_worker_behind_on_its_purge_steps_again_before_its_next_sweep(
    make_app: Callable[..., App], clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written faster than one step a sweep purges must not grow without bound: a
    step that ends with rows left is followed by another soon, not at the next sweep."""
    app = make_app(purge_batch=2)

    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None: ...

    for n in range(8):
        app.db.document(f"orders/o{n}").set({"n": n})
    app.drain()
    clock.advance(WEEK + 1)
    one_round = functools.partial(retention.purge_step, seconds=0.0)  # every step one round
    monkeypatch.setattr(retention, "purge_step", one_round)
    worker = Worker(app.runtime)  # its next sweep is sweep_every (5 s) away
    try:
        worker.housekeeping.tick()  # a sweep's step: one round of 2, rows left
        assert app.purge(dry_run=True).deliveries == 6
        assert worker.housekeeping.is_purge_behind
        for _ in range(400):  # well within two seconds: each pause is 4 times a step
            worker.maintain()
            if not worker.housekeeping.is_purge_behind:
                break  # caught up: no step until the next sweep
            time.sleep(0.005)
        assert app.purge(dry_run=True).total() == 0
        assert not worker.housekeeping.is_purge_behind
    finally:
        worker.shutdown()


def test_the_worker_maintenance_step_purges(app: App, clock: TestClock) -> None:
    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None: ...

    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(WEEK + 1)
    app.drain()  # nothing due: the maintenance step still runs, and purges
    assert app.purge(dry_run=True).total() == 0
    assert app.stats()["ship"].succeeded == 0  # outside the 24 h window
    assert app.stats(window=30 * DAY)["ship"].succeeded == 1


@pytest.mark.parametrize(
    ("options", "minimum"),
    [
        ({}, "1860"),
        ({"max_event_age": 3600.0}, "5460"),
        ({"retry": False, "max_event_age": 90}, "90"),
    ],
)
def test_a_retention_shorter_than_a_functions_redelivery_window_is_refused(
    make_app: Callable[..., App], options: dict[str, object], minimum: str
) -> None:
    app = make_app(succeeded_retention=60.0)

    with pytest.raises(ConfigError, match=f"succeeded_retention of at least {minimum} s"):

        @app.on_message("mails", **options)  # type: ignore[arg-type]
        def send(event: Event) -> None: ...


def test_a_new_sqlite_store_gives_the_purged_pages_back(sqlite_url: str, clock: TestClock) -> None:
    app = App(sqlite_url, clock=clock)

    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None: ...

    for n in range(300):
        app.db.document(f"orders/o{n}").set({"blob": "x" * 4000})
    for n in range(300):
        app.db.document(f"orders/o{n}").delete()
    app.drain()
    path = sqlite_url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # INCREMENTAL
        before = conn.execute("PRAGMA page_count").fetchone()[0]
    clock.advance(WEEK + 1)
    counts = app.purge()
    assert (counts.events, counts.unrouted) == (300, 300)  # deletions: no function takes them
    with closing(sqlite3.connect(path)) as conn:
        after = conn.execute("PRAGMA page_count").fetchone()[0]
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)
    assert after < before / 2
    app.close()
