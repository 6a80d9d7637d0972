"""Rescue is partitioned (issue 11, point 13): workers that sweep at once each take different
expired leases, a lost race is no "lease lost" warning, and a dead worker's 512 leases are
rescued in one sweep of each worker plus an empty one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import pytest

from oncefire import App, RetryPolicy
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.stores.base import Leased
from oncefire.testing import TestClock

DEAD_HELD = 512
LEASE = 30.0


def register(app: App) -> None:
    """The function every worker serves."""

    @app.on_message("t", name="f", retry_policy=RetryPolicy(first_delay=60.0))
    def f(event: Event) -> None:  # never runs here: the test only rescues
        raise AssertionError("rescue must not run a function")


def test_two_workers_rescue_a_dead_workers_512_leases_once_each(
    make_app: Callable[..., App], clock: TestClock, caplog: pytest.LogCaptureFixture
) -> None:
    dead, first, second = make_app(), make_app(), make_app()
    for app in (dead, first, second):
        register(app)
    event_ids = [dead.publish("t", {"n": n}) for n in range(DEAD_HELD)]
    now = clock.now()
    held = dead.store.lease_due(
        worker="dead", now=now, lease_until=now + LEASE, limit=DEAD_HELD, functions=["f"], caps={}
    )
    assert len(held) == DEAD_HELD
    dead.store.start([c.lease for c in held[: DEAD_HELD // 2]], now)  # half had started
    clock.advance(LEASE + 1)  # the dead worker's leases run out

    taken: dict[str, list[int]] = {"first": [], "second": []}
    sweeps = {"first": 0, "second": 0}
    barrier = threading.Barrier(2)

    def sweeper(name: str, app: App) -> None:
        store = app.store
        take = store.take_expired_leases

        def recorded(
            now: float, lease_until: float, functions: Sequence[str], limit: int
        ) -> list[Leased]:
            rows = take(now, lease_until, functions, limit)
            taken[name] += [c.lease.delivery_id for c in rows]
            return rows

        store.take_expired_leases = recorded  # type: ignore[method-assign]
        worker = Worker(app.runtime, concurrency=1)
        barrier.wait()
        while True:
            sweeps[name] += 1
            if worker.rescue() == 0:
                return

    caplog.set_level(logging.DEBUG)
    threads = [
        threading.Thread(target=sweeper, args=("first", first)),
        threading.Thread(target=sweeper, args=("second", second)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)

    ids = sorted(c.lease.delivery_id for c in held)
    assert not set(taken["first"]) & set(taken["second"]), "a delivery was rescued twice"
    assert sorted(taken["first"] + taken["second"]) == ids, "every delivery rescued once"
    assert sweeps["first"] <= 2 and sweeps["second"] <= 2, sweeps
    lost = [r for r in caplog.records if "lease lost" in r.getMessage()]
    assert not [r for r in lost if r.levelno >= logging.WARNING], "a lost race warned"
    # Started ones are charged one crashed attempt and wait for their retry; the rest are
    # handed back uncharged.
    started = {c.event.id for c in held[: DEAD_HELD // 2]}
    for event_id in event_ids:
        [(_, state, attempt)] = first.store.delivery_states(event_id)
        assert (state, attempt) == ("pending", 1 if event_id in started else 0)
        crashed = [a for a in first.store.attempts(event_id) if a["outcome"] == "crashed"]
        assert len(crashed) == (1 if event_id in started else 0)
