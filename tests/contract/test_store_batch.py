"""store.batch(): many recorded attempts share one transaction (one commit), all or nothing."""

from __future__ import annotations

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.stores.base import Claimed, Ending, Lease


def claim_all(app: App) -> list[Claimed]:
    """Claim and start every due delivery of f, as a worker would."""
    now = app.clock.now()
    claimed = app.store.claim(
        worker="w", now=now, lease_until=now + 30, limit=10, functions=["f"], caps={}
    )
    app.store.start([c.lease for c in claimed], now)
    return claimed


@pytest.fixture
def claimed(app: App) -> list[Claimed]:
    @app.on_document_created("orders/{o}")
    def f(event: Event) -> None:
        pass

    for n in range(3):
        app.db.document(f"orders/o{n}").set({"n": n})
    return claim_all(app)


def states(app: App, items: list[Claimed]) -> list[str]:
    return [app.store.delivery_states(c.event.id)[0][1] for c in items]


def test_calls_inside_a_batch_commit_together(app: App, claimed: list[Claimed]) -> None:
    done = Ending("succeeded", finished_at=app.clock.now())
    with app.store.batch():
        assert app.store.complete(claimed[0].lease, done)
        assert app.store.retry(claimed[1].lease, Ending("failed", finished_at=0, error="x"), 99.0)
        assert app.store.bury(
            claimed[2].lease, Ending("failed", finished_at=0, error="x"), "x", None
        )
        with app.store.batch():  # a nested batch joins the outer one
            assert not app.store.complete(claimed[0].lease, done)  # guards still hold
    assert states(app, claimed) == ["succeeded", "pending", "dead"]


def test_an_error_inside_a_batch_rolls_back_every_call(app: App, claimed: list[Claimed]) -> None:
    done = Ending("succeeded", finished_at=app.clock.now())
    with pytest.raises(RuntimeError), app.store.batch():
        assert app.store.complete(claimed[0].lease, done)
        assert app.store.complete(claimed[1].lease, done)
        raise RuntimeError("the recorder failed half-way")
    assert states(app, claimed) == ["running", "running", "running"]
    with app.store.batch():  # the store is usable afterwards
        assert app.store.complete(claimed[0].lease, done)
    assert states(app, claimed) == ["succeeded", "running", "running"]


def test_complete_many_completes_the_leases_still_held_and_nothing_else(
    app: App, claimed: list[Claimed]
) -> None:
    stale = Lease(claimed[2].lease.delivery_id, "not-the-token")
    now = app.clock.now()
    done = app.store.complete_many(
        [
            (
                claimed[0].lease,
                Ending("succeeded", finished_at=now + 2, error=None, started_at=now + 1),
            ),
            (claimed[1].lease, Ending("succeeded", finished_at=now + 3)),
            (stale, Ending("succeeded", finished_at=now + 3)),
        ]
    )
    assert done == {claimed[0].lease.delivery_id, claimed[1].lease.delivery_id}
    assert states(app, claimed) == ["succeeded", "succeeded", "running"]
    [first] = app.store.attempts(claimed[0].event.id)
    assert (first["outcome"], first["started_at"], first["finished_at"]) == (
        "succeeded",
        now + 1,
        now + 2,
    )
    [second] = app.store.attempts(claimed[1].event.id)
    assert second["started_at"] == now  # no start given: the start mark's time stays
    assert app.store.complete_many([]) == set()
