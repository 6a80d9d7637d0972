"""store.batch(): many recorded attempts share one transaction (one commit), all or nothing."""

from __future__ import annotations

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.idempotency import COMPLETED, IN_PROGRESS
from oncefire.stores.base import (
    Completed,
    Ending,
    IdempotencyCompletion,
    IdempotencyRecord,
    Lease,
    Leased,
)


def lease_all(app: App) -> list[Leased]:
    """Lease and start every due delivery of f, as a worker would."""
    now = app.clock.now()
    leased = app.store.lease_due(
        worker="w", now=now, lease_until=now + 30, limit=10, functions=["f"], caps={}
    )
    app.store.start([c.lease for c in leased], now)
    return leased


@pytest.fixture
def leased(app: App) -> list[Leased]:
    @app.on_document_created("orders/{o}")
    def f(event: Event) -> None:
        pass

    for n in range(3):
        app.db.document(f"orders/o{n}").set({"n": n})
    return lease_all(app)


def states(app: App, items: list[Leased]) -> list[str]:
    return [app.store.delivery_states(c.event.id)[0][1] for c in items]


def test_calls_inside_a_batch_commit_together(app: App, leased: list[Leased]) -> None:
    done = Ending("succeeded", finished_at=app.clock.now())
    with app.store.batch():
        assert app.store.complete(leased[0].lease, done)
        assert app.store.retry(leased[1].lease, Ending("failed", finished_at=0, error="x"), 99.0)
        assert app.store.bury(
            leased[2].lease, Ending("failed", finished_at=0, error="x"), "x", None
        )
        with app.store.batch():  # a nested batch joins the outer one
            assert not app.store.complete(leased[0].lease, done)  # guards still hold
    assert states(app, leased) == ["succeeded", "pending", "dead"]


def test_an_error_inside_a_batch_rolls_back_every_call(app: App, leased: list[Leased]) -> None:
    done = Ending("succeeded", finished_at=app.clock.now())
    with pytest.raises(RuntimeError), app.store.batch():
        assert app.store.complete(leased[0].lease, done)
        assert app.store.complete(leased[1].lease, done)
        raise RuntimeError("the recorder failed half-way")
    assert states(app, leased) == ["running", "running", "running"]
    with app.store.batch():  # the store is usable afterwards
        assert app.store.complete(leased[0].lease, done)
    assert states(app, leased) == ["succeeded", "running", "running"]


def test_complete_many_completes_the_leases_still_held_and_nothing_else(
    app: App, leased: list[Leased]
) -> None:
    stale = Lease(leased[2].lease.delivery_id, "not-the-token")
    now = app.clock.now()
    done = app.store.complete_many(
        [
            (
                leased[0].lease,
                Ending("succeeded", finished_at=now + 2, error=None, started_at=now + 1),
            ),
            (leased[1].lease, Ending("succeeded", finished_at=now + 3)),
            (stale, Ending("succeeded", finished_at=now + 3)),
        ]
    )
    assert done.ids == {leased[0].lease.delivery_id, leased[1].lease.delivery_id}
    assert states(app, leased) == ["succeeded", "succeeded", "running"]
    [first] = app.store.attempts(leased[0].event.id)
    assert (first["outcome"], first["started_at"], first["finished_at"]) == (
        "succeeded",
        now + 1,
        now + 2,
    )
    [second] = app.store.attempts(leased[1].event.id)
    assert second["started_at"] == now  # no start given: the start mark's time stays
    assert app.store.complete_many([]) == Completed(set(), set())


def test_complete_many_completes_the_records_its_endings_carry_whose_token_holds(
    app: App, leased: list[Leased]
) -> None:
    # A worker's turn completes the @idempotent records of its successes with them (on
    # PostgreSQL in the statement that ends them); a record another attempt took over is not.
    now = app.clock.now()
    for key in ("f/h/held", "f/h/taken-over"):
        record = IdempotencyRecord(key, "f", IN_PROGRESS, "mine", "hash", now + 60, now + 99, None)
        assert app.store.acquire_idempotency(record, now)
    other = IdempotencyRecord("f/h/taken-over", "f", IN_PROGRESS, "theirs", "hash", now, now, None)
    assert app.store.take_over_idempotency(other, "mine", now + 60)
    completions = tuple(
        IdempotencyCompletion(key, "mine", now + 1, now + 50, f'"{key}"')
        for key in ("f/h/held", "f/h/taken-over")
    )
    ending = Ending("succeeded", finished_at=now + 1, completions=completions)
    with app.store.batch():
        done = app.store.complete_many([(leased[0].lease, ending)])
    assert done == Completed({leased[0].lease.delivery_id}, {"f/h/held"})
    held = app.store.idempotency_record("f/h/held")
    assert held is not None and (held.status, held.result_json) == (COMPLETED, '"f/h/held"')
    taken = app.store.idempotency_record("f/h/taken-over")
    assert taken is not None and (taken.status, taken.token) == (IN_PROGRESS, "theirs")
