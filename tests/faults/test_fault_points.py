"""The fault-point sweep (issue 13, point 3): every statement of each core path is failed in
turn, before it runs and after it ran but before the caller sees its result (for a COMMIT:
committed, then the error), on both stores. After each fault the invariants hold:

- no loss: an acknowledged write's event has its deliveries; an unacknowledged one happened
  fully (document, event, delivery, effect) or not at all;
- no duplicate committed effect: the `tx.claim` keyed write lands once; the `@idempotent`
  outside effect runs once;
- every delivery's state is legal and its attempt count matches its attempt rows;
- the system recovers: the next drains (after the leases run out) finish the work.

The hook is `oncefire.stores.faults.FAULTS`; see docs/reliability.md, "Fault-point sweep".
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from oncefire import App, Increment, PermanentError, RetryPolicy, idempotent
from oncefire.engine.endings import write_ending
from oncefire.errors import EventNotFoundError
from oncefire.events import Event
from oncefire.features import ttl
from oncefire.retry import Outcome
from oncefire.stores import faults
from oncefire.stores.base import Ending, Leased
from oncefire.testing import TestClock

LEASE = 30.0
STATES = {"pending", "running", "succeeded", "dead"}
FIRST = RetryPolicy(first_delay=0.0)


class World:
    """An App with one function of each kind, the effects they had, and fresh ids."""

    def __init__(self, url: str, clock: TestClock) -> None:
        self.clock = clock
        self.app = app = App(url, clock=clock, lease=LEASE)
        self.runs: Counter[str] = Counter()
        self.effects: Counter[str] = Counter()  # outside effects of @idempotent, per event
        self.failing: set[str] = set()  # events whose charge raises once
        self.burying: set[str] = set()  # events whose "history_too" is a dead letter
        self.ids = itertools.count()
        self.events: list[str] = []  # every event id to check

        @app.on_message("t", name="plain", retry_policy=FIRST)
        def plain(event: Event) -> None:
            self.runs[event.id] += 1

        @app.on_document_created("orders/{order}", name="count", retry_policy=FIRST)
        def count(event: Event) -> None:
            order = event.params["order"]
            with app.db.transaction() as tx:
                if tx.claim(f"count:{event.id}"):
                    tx.set(app.db.document(f"counts/{order}"), {"n": Increment(1)}, merge=True)

        @app.on_message("pay", name="charge", retry_policy=FIRST, timeout=LEASE)
        @idempotent(lease=LEASE)
        def charge(event: Event) -> str:
            if event.id in self.failing:
                self.failing.discard(event.id)
                raise RuntimeError("the payment API is down")
            self.effects[event.id] += 1
            return "ch_1"

        @app.on_message("h", name="history", retry_policy=FIRST)
        def history(event: Event) -> None:
            pass

        @app.on_message("h", name="history_too", retry_policy=FIRST)
        def history_too(event: Event) -> None:
            if event.id in self.burying:
                raise PermanentError("refused")

    def publish(self, topic: str = "t") -> str:
        event_id = self.app.publish(topic, {"n": next(self.ids)})
        self.events.append(event_id)
        return event_id

    def hold(self, event_id: str, *, is_started: bool = True, function: str = "plain") -> Leased:
        """Lease the event's delivery as a worker would (and start it)."""
        now = self.clock.now()
        leased = self.app.store.lease_due(
            worker="w", now=now, lease_until=now + LEASE, limit=100, functions=[function], caps={}
        )
        [mine] = [c for c in leased if c.event.id == event_id]
        if is_started:
            self.app.store.start([mine.lease], now)
        return mine

    def dead_letter(self) -> int:
        """A delivery of a fresh event, buried; its id."""
        held = self.hold(self.publish())
        assert write_ending(
            self.app.runtime, self.app.triggers["plain"], held, Ending(Outcome.PERMANENT, "x")
        )
        return held.lease.delivery_id

    def recover(self) -> None:
        """What the workers do next: drain, and once the leases ran out, drain again."""
        for _ in range(4):
            self.app.drain()
            self.clock.advance(LEASE * 2 + 1)

    def check(self, *, is_final: bool) -> None:
        """Every delivery's state is legal and its attempt count matches its attempt rows."""
        for event_id in self.events:
            # Ended attempts (the running one's row is written when it ends).
            rows = [r for r in self.app.store.attempts(event_id) if r["outcome"] is not None]
            for function, state, attempt in self.app.store.delivery_states(event_id):
                assert state in (STATES - {"pending", "running"} if is_final else STATES), (
                    f"{function} of {event_id}: {state}"
                )
                numbers = [r["number"] for r in rows if r["function"] == function]
                # Numbers run 1, 2, ... and start again at 1 after a replay.
                assert all(b == a + 1 or b == 1 for a, b in itertools.pairwise(numbers)), numbers
                last = numbers[-1] if numbers else 0
                if state == "running":
                    assert attempt == last + 1, (state, attempt, numbers)
                elif state == "pending" and attempt == 0:
                    pass  # replayed (or never leased)
                else:
                    assert attempt == last, (function, state, attempt, numbers)
                if is_final:
                    outcome = [r["outcome"] for r in rows if r["function"] == function][-1]
                    assert (outcome == "succeeded") == (state == "succeeded"), (state, outcome)


@dataclass(frozen=True)
class Path:
    """A core path: setup (not swept) returns the argument of act (swept); then() checks
    what only this path promises, after the fault (is_acknowledged: act returned)."""

    name: str
    setup: Callable[[World], Any]
    act: Callable[[World, Any], Any]
    then: Callable[[World, Any, bool], None] | None = None
    after_recovery: Callable[[World, Any], None] = lambda world, arg: None
    # A drain records a fault inside a function's own transaction as a failed attempt.
    may_absorb: bool = False


def write(world: World, order: str) -> None:
    world.app.db.document(f"orders/{order}").set({"total": 1})


def write_setup(world: World) -> str:
    return f"o{next(world.ids)}"


def write_then(world: World, order: str, is_acknowledged: bool) -> None:
    if is_acknowledged:
        assert world.app.db.document(f"orders/{order}").get().exists


def write_recovered(world: World, order: str) -> None:
    # The document exists exactly when its event was delivered: once, by the tx.claim write.
    exists = world.app.db.document(f"orders/{order}").get().exists
    counted = world.app.db.document(f"counts/{order}").get()
    landed = counted.get("n") if counted.exists else 0
    assert landed == (1 if exists else 0), f"the tx.claim write landed {landed} times"


def lease_act(world: World, event_id: str) -> None:
    now = world.clock.now()
    world.app.store.lease_due(
        worker="w", now=now, lease_until=now + LEASE, limit=100, functions=["plain"], caps={}
    )


def renew_act(world: World, held: Leased) -> None:
    now = world.clock.now()
    world.app.store.renew([held.lease], now, now + LEASE)


def ending(outcome: Outcome) -> Callable[[World, Leased], None]:
    def act(world: World, held: Leased) -> None:
        write_ending(world.app.runtime, world.app.triggers["plain"], held, Ending(outcome, "boom"))

    return act


def ran_once(world: World, event_id: str) -> None:
    assert world.runs[event_id] <= 1 and world.effects[event_id] <= 1


def charge_setup(world: World) -> str:
    return world.publish("pay")


def charged_once(world: World, event_id: str) -> None:
    assert world.effects[event_id] == 1, "the outside effect ran twice (or never)"


def release_setup(world: World) -> str:
    event_id = world.publish("pay")
    world.failing.add(event_id)  # the first run raises: its record is released
    return event_id


def take_over_setup(world: World) -> str:
    """A charge whose first attempt died holding its record: the next one takes it over."""
    event_id = world.publish("pay")
    world.failing.add(event_id)
    store = world.app.store
    store.release_idempotency = lambda key, token: False  # type: ignore[method-assign]
    try:
        world.app.drain()
    finally:
        del store.release_idempotency
    world.clock.advance(LEASE + 1)
    return event_id


def purge_setup(world: World) -> tuple[str, str]:
    old, young = f"old{next(world.ids)}", f"young{next(world.ids)}"
    with world.app.db.transaction() as tx:
        assert tx.claim(old, ttl=10)
    world.clock.advance(11)
    with world.app.db.transaction() as tx:
        assert tx.claim(young, ttl=1000)
    return old, young


def purge_recovered(world: World, keys: tuple[str, str]) -> None:
    old, young = keys
    ttl.sweep(world.app.runtime)
    assert world.app.store.purge_expired_claims(world.clock.now(), 100) == 0
    with pytest.raises(RuntimeError), world.app.db.transaction() as tx:
        assert tx.claim(old, ttl=10)  # purged: free again
        assert not tx.claim(young, ttl=10)  # still held
        raise RuntimeError("roll back")


@dataclass(frozen=True)
class Aged:
    """History made older than every retention, by what the purge must do with it."""

    done: str  # both deliveries succeeded: purged, with its event
    half: str  # one delivery succeeded, one still running: the event stays
    dead: str  # one delivery succeeded, one a dead letter: the event stays
    unrouted: str  # no function takes it: purged


def is_stored(world: World, event_id: str) -> bool:
    try:
        world.app.history.event(event_id)
    except EventNotFoundError:
        return False
    return True


def retention_setup(world: World) -> Aged:
    done, dead = world.publish("h"), world.publish("h")
    world.burying.add(dead)
    world.app.drain()
    half = world.publish("h")
    world.hold(half, function="history_too")
    world.app.drain()  # its other delivery succeeds
    unrouted = world.app.publish("nobody", {"n": 0})
    world.clock.advance(world.app.settings.statistics_retention + 1)  # past every retention
    return Aged(done, half, dead, unrouted)


def nothing_half_purged(world: World, aged: Aged) -> None:
    """An event is stored exactly while a delivery refers to it, and a purged one left no
    attempt behind; the running delivery and every dead letter stay, with their events."""
    for event_id in world.events:
        states = world.app.store.delivery_states(event_id)
        assert is_stored(world, event_id) == bool(states), (event_id, states)
        if not states:
            assert world.app.store.attempts(event_id) == [], event_id
        if event_id in world.burying:
            assert ("history_too", "dead", 1) in states, states
    assert ("history_too", "running", 1) in world.app.store.delivery_states(aged.half)


def retention_then(world: World, aged: Aged, is_acknowledged: bool) -> None:
    nothing_half_purged(world, aged)
    if is_acknowledged:
        assert world.app.purge(dry_run=True).total() == 0, "a purge left purgeable history"
        assert not is_stored(world, aged.done) and not is_stored(world, aged.unrouted)


def retention_recovered(world: World, aged: Aged) -> None:
    world.app.purge()
    assert world.app.purge(dry_run=True).total() == 0
    assert not is_stored(world, aged.done) and not is_stored(world, aged.unrouted)
    assert is_stored(world, aged.dead) and is_stored(world, aged.half)
    for event_id in world.events:
        states = world.app.store.delivery_states(event_id)
        assert is_stored(world, event_id) == bool(states), (event_id, states)


def drain(world: World, _: Any) -> None:
    world.app.drain()


def write_and_drain(world: World, order: str) -> None:
    write(world, order)
    world.app.drain()


PATHS = [
    Path("write + outbox", write_setup, write, write_then, write_recovered),
    Path("lease", lambda w: w.publish(), lease_act, after_recovery=ran_once),
    Path("renew", lambda w: w.hold(w.publish()), renew_act),
    Path("complete", lambda w: w.hold(w.publish()), ending(Outcome.SUCCEEDED)),
    Path("retry", lambda w: w.hold(w.publish()), ending(Outcome.FAILED)),
    Path("bury", lambda w: w.hold(w.publish()), ending(Outcome.PERMANENT)),
    Path("replay", World.dead_letter, lambda w, i: w.app.dead_letters.replay(i)),
    Path("dismiss", World.dead_letter, lambda w, i: w.app.dead_letters.dismiss(i)),
    Path("tx.claim", write_setup, write_and_drain, None, write_recovered, True),
    Path("@idempotent acquire + complete", charge_setup, drain, None, charged_once, True),
    Path("@idempotent release", release_setup, drain, None, charged_once, True),
    Path("@idempotent take-over", take_over_setup, drain, None, charged_once, True),
    Path(
        "purge", purge_setup, lambda w, _: ttl.sweep(w.app.runtime), after_recovery=purge_recovered
    ),
    Path(
        "retention purge",
        retention_setup,
        lambda w, _: w.app.purge(),
        retention_then,
        retention_recovered,
    ),
]


def sweep(world: World, path: Path) -> Iterator[faults.FaultPlan]:
    """Run path once per fault point; yield each plan that fired."""
    for is_after in (False, True):
        for k in itertools.count(1):
            arg = path.setup(world)
            plan = faults.FaultPlan(k, is_after)
            faults.FAULTS = plan
            try:
                path.act(world, arg)
                is_acknowledged = True
            except faults.InjectedFault:
                is_acknowledged = False
            finally:
                faults.FAULTS = None
            if not path.may_absorb:
                assert is_acknowledged == (plan.fired is None), "a fault was swallowed"
            if path.then is not None:
                path.then(world, arg, is_acknowledged)
            world.check(is_final=False)
            world.recover()
            world.check(is_final=True)
            path.after_recovery(world, arg)
            if plan.fired is None:
                break  # past the last statement of the path
            yield plan


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_every_fault_point_keeps_the_invariants(
    store_url: str, path: Path, fault_points: Counter[str]
) -> None:
    world = World(store_url, TestClock())
    try:
        plans = list(sweep(world, path))
    finally:
        faults.FAULTS = None
        world.app.close()
    store = store_url.split(":")[0]
    fault_points[f"{path.name} [{store}]"] = len(plans)
    assert plans, "the path ran no statement"
    print(f"\n{path.name} [{store}]: {len(plans)} fault points: {[p.fired for p in plans]}")
