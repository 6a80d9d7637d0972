"""@idempotent records acquired with the lease (issue 18, point 11): a worker that leases
deliveries of a function that is itself @idempotent, with the default key, acquires their
records in the lease's transaction, in one statement, and each attempt runs on its record
(no statement of its own). The records of deliveries that never ran come back (handed back,
rescued uncharged, or ended before the function was called); one that may have run keeps its
record; an attempt that starts too long after its lease acquires anew."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from oncefire import App, RetryPolicy, idempotent
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.idempotency import QUEUED_FOR, TAKE_OVER_AFTER
from oncefire.stores.base import IdempotencyCompletion, IdempotencyRecord
from oncefire.testing import TestClock
from tests.contract.records.idempotency_support import record_of
from tests.contract.worker_support import WAIT, app_of, learned_worker, turn_until

LEASE = 30.0
WITH_LEASE = re.compile(r"^\d+\.1\.[0-9a-f]{32}$")  # "<delivery id>.<attempt>.<random>"
OWN = re.compile(r"^[0-9a-f]{32}$")  # a token the attempt made


class Charges:
    """An @idempotent function `charge`, registered on several apps: counts runs by event
    id; an event whose data has "block" waits in its first run until the test ends."""

    def __init__(self, key: Callable[[Event], Any] | None = None) -> None:
        self.count: Counter[str] = Counter()
        self.started = threading.Semaphore(0)
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.key = key

    def register(self, app: App, **options: Any) -> None:
        runs = self

        def charge(event: Event) -> None:
            with runs.lock:
                runs.count[event.id] += 1
                first = runs.count[event.id] == 1
            if first and event.data.data.get("block"):
                runs.started.release()
                assert runs.gate.wait(WAIT * 3), "the test never released the gate"

        guarded = (
            idempotent(lease=LEASE) if self.key is None else idempotent(lease=LEASE, key=self.key)
        )
        policy = RetryPolicy(max_attempts=3, first_delay=0.0)
        app.on_message("t", name="charge", retry_policy=policy, timeout=LEASE, **options)(
            guarded(charge)
        )


@pytest.fixture
def charges() -> Iterator[Charges]:
    charges = Charges()
    yield charges
    charges.gate.set()  # let the threads of the dead workers end


def worker_of(make_app: Callable[..., App], charges: Charges, **settings: Any) -> Worker:
    """A worker (concurrency 1) of a fresh App (a process) that leases and marks started far
    ahead of its one slot."""
    app = make_app(**settings)
    charges.register(app)
    return learned_worker(app)


def publish(app: App, *data: dict[str, Any]) -> list[str]:
    return [app.publish("t", d) for d in data]


def outcomes(app: App, event_id: str) -> list[str]:
    return [a["outcome"] for a in app.store.attempts(event_id)]


def record(app: App, event_id: str) -> IdempotencyRecord | None:
    return record_of(app, event_id, helper="charge")


@pytest.mark.parametrize("key", ["event id", "custom"])
def test_a_worker_acquires_the_records_of_what_it_leases_in_the_lease_transaction(
    make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    charges = Charges(key=None if key == "event id" else lambda event: f"k-{event.id}")
    app = make_app()
    charges.register(app)
    store = app.store
    depth = 0
    acquired_in: list[tuple[bool, int]] = []  # (inside a batch, records) per statement
    own: list[str] = []  # keys the attempts acquired with a statement of their own
    batch, many, one = store.batch, store.acquire_idempotency_many, store.acquire_idempotency

    def counted_batch() -> Any:
        outer = batch()

        class Depth:
            def __enter__(self) -> None:
                nonlocal depth
                depth += 1
                outer.__enter__()

            def __exit__(self, *exc: Any) -> None:
                nonlocal depth
                depth -= 1
                outer.__exit__(*exc)

        return Depth()

    def acquire_many(rows: Any, now: float) -> set[str]:
        acquired_in.append((depth > 0, len(rows)))
        return many(rows, now)

    def acquire_one(held: IdempotencyRecord, now: float) -> bool:
        own.append(held.key)
        return one(held, now)

    monkeypatch.setattr(store, "batch", counted_batch)
    monkeypatch.setattr(store, "acquire_idempotency_many", acquire_many)
    monkeypatch.setattr(store, "acquire_idempotency", acquire_one)
    ids = publish(app, *({"n": n} for n in range(5)))
    worker = learned_worker(app)  # short attempts: one lease takes all five
    assert worker.drain().attempts == 5
    assert charges.count == Counter(ids)
    for event_id in ids:
        assert outcomes(app, event_id) == ["succeeded"]
    if key == "event id":
        assert acquired_in == [(True, 5)]  # one statement, in the lease's transaction
        assert own == []
        tokens = [r.token for r in map(lambda i: record(app, i), ids) if r is not None]
        assert len(tokens) == 5 and all(WITH_LEASE.match(t) for t in tokens), tokens
    else:  # a custom key is not computed by the worker: each attempt acquires its own
        assert acquired_in == []
        assert len(own) == 5


def test_a_dead_workers_wave_keeps_its_records_and_runs_again_once_they_may_be_taken_over(
    make_app: Callable[..., App], clock: TestClock, charges: Charges
) -> None:
    worker = worker_of(make_app, charges)
    blocked, *queued = publish(app_of(worker), {"block": True}, {}, {}, {})
    # One commit leases the four and acquires their records; blocked starts alone (marked
    # started), the rest are marked ahead and wait in the queue.
    assert worker.lease_and_start() == 4
    turn_until(worker, "blocked to start", lambda: charges.started.acquire(blocking=False))
    for event_id in (blocked, *queued):
        held = record(app_of(worker), event_id)
        assert held is not None and held.status == "in_progress" and WITH_LEASE.match(held.token)
    clock.advance(LEASE + 1)  # the process dies (stalls) during blocked
    second = make_app()
    charges.register(second)
    second.drain()
    # blocked may have run: its record is kept, so its retry does not repeat the effect beside
    # a stalled worker that may wake up, until the lease and the take-over delay end.
    assert outcomes(second, blocked)[0] == "crashed"
    held = record(second, blocked)
    assert held is not None and held.status == "in_progress" and WITH_LEASE.match(held.token)
    assert charges.count[blocked] == 1
    # The rest were marked ahead: whether they ran is not known, so their records are kept
    # too. Handed back uncharged, they are due when their records may be taken over.
    for event_id in queued:
        assert outcomes(second, event_id) == [], event_id
        assert record(second, event_id) is not None
        assert second.store.delivery_states(event_id)[0][1:] == ("pending", 0)
    clock.advance(TAKE_OVER_AFTER)
    second.drain()
    for event_id in queued:  # taken over, each runs once, with no failure charged
        assert outcomes(second, event_id) == ["succeeded"], event_id
        assert charges.count[event_id] == 1


def test_a_stalled_worker_keeps_the_records_of_what_it_ran_marked_ahead(
    make_app: Callable[..., App], clock: TestClock, charges: Charges
) -> None:
    # Two leased together on two slots are both marked ahead (neither starts alone) and enter
    # their function; the worker stalls past its lease (a store restart, a paused process)
    # before a commit confirms them started.
    app = make_app()
    charges.register(app)
    worker = learned_worker(app, concurrency=2)
    ids = publish(app, {"block": True}, {"block": True})
    assert worker.lease_and_start() == 2
    for _ in ids:
        assert charges.started.acquire(timeout=WAIT)
    assert [state[1] for i in ids for state in app.store.delivery_states(i)] == ["running"] * 2
    clock.advance(LEASE + 1)
    second = make_app()
    charges.register(second)
    # Handed back uncharged, as marked ahead, their records held: due when those may be taken
    # over (the record's lease, here as long as the worker's, then TAKE_OVER_AFTER).
    assert second.drain().attempts == 0
    for event_id in ids:
        assert charges.count[event_id] == 1, "repeated beside the stalled worker"
        held = record(second, event_id)
        assert held is not None and held.status == "in_progress" and WITH_LEASE.match(held.token)
        assert app.store.delivery_states(event_id)[0][1:] == ("pending", 0)
    charges.gate.set()  # the worker wakes up: its leases are lost, its effects are recorded
    turn_until(worker, "both to end", lambda: not worker.is_busy)
    clock.advance(TAKE_OVER_AFTER)
    assert second.drain().attempts == 2
    for event_id in ids:
        done = record(second, event_id)
        assert done is not None and done.status == "completed"
        assert outcomes(second, event_id) == ["succeeded"]  # the completed record's result
        assert charges.count[event_id] == 1


def test_a_queue_handed_back_gets_its_records_back(
    make_app: Callable[..., App], charges: Charges
) -> None:
    worker = worker_of(make_app, charges, shutdown_grace=0.05)
    app = app_of(worker)
    blocked, *queued = publish(app, {"block": True}, {}, {})
    assert worker.lease_and_start() == 3
    assert charges.started.acquire(timeout=WAIT)
    assert all(record(app, event_id) is not None for event_id in queued)
    worker.shutdown()  # the queue is handed back; blocked runs on past the grace period
    for event_id in queued:
        assert record(app, event_id) is None, event_id
        assert app.store.delivery_states(event_id)[0][1:] == ("pending", 0)
    held = record(app, blocked)
    assert held is not None and held.status == "in_progress"


def test_an_attempt_that_starts_long_after_its_lease_acquires_anew(
    make_app: Callable[..., App], clock: TestClock, charges: Charges
) -> None:
    worker = worker_of(make_app, charges)
    app = app_of(worker)
    _, late = publish(app, {"block": True}, {})
    assert worker.lease_and_start() == 2
    assert charges.started.acquire(timeout=WAIT)
    first = record(app, late)
    assert first is not None and WITH_LEASE.match(first.token)
    clock.advance(QUEUED_FOR + 1)  # its record could end before the function's timeout
    charges.gate.set()
    turn_until(worker, "both to end", lambda: len(charges.count) == 2 and not worker.is_busy)
    done = record(app, late)
    assert done is not None and done.status == "completed" and OWN.match(done.token)
    assert done.lease_until == clock.now()  # completed at once: acquired when it started
    assert outcomes(app, late) == ["succeeded"]
    assert charges.count[late] == 1


def test_an_attempt_that_never_calls_its_function_gets_its_record_back(
    make_app: Callable[..., App], clock: TestClock, charges: Charges
) -> None:
    app = make_app()
    charges.register(app, max_event_age=60.0)
    (old,) = publish(app, {})
    clock.advance(61)  # too old when it is leased: parked without a run
    assert Worker(app.runtime, concurrency=1).drain().attempts == 1
    assert outcomes(app, old) == ["expired"]
    assert charges.count[old] == 0
    assert record(app, old) is None


# -- the store's operations ---------------------------------------------------------------


def held_record(key: str, token: str, now: float, lease: float = LEASE) -> IdempotencyRecord:
    """An in-progress record of key, leased from now."""
    return IdempotencyRecord(key, "charge", "in_progress", token, "h", now + lease, now + 100, None)


def test_acquire_many_inserts_new_keys_replaces_expired_ones_and_leaves_live_ones(
    app: App, clock: TestClock
) -> None:
    store, now = app.store, clock.now()
    assert store.acquire_idempotency(held_record("live", "old", now), now)
    assert store.acquire_idempotency(held_record("gone", "old", now - 200), now - 200)
    rows = [held_record(k, "1.1.new", now) for k in ("new", "live", "gone")]
    assert store.acquire_idempotency_many(rows, now) == {"new", "gone"}
    tokens = {k: store.idempotency_record(k) for k in ("new", "live", "gone")}
    assert {k: r.token for k, r in tokens.items() if r is not None} == {
        "new": "1.1.new",
        "live": "old",
        "gone": "1.1.new",
    }
    assert store.acquire_idempotency_many([], now) == set()


def test_release_many_deletes_in_progress_records_whose_token_starts_as_given(
    app: App, clock: TestClock
) -> None:
    store, now = app.store, clock.now()
    for key, token in [("a", "7.1.x"), ("b", "7.2.x"), ("c", "71.1.x"), ("d", "7.1.y")]:
        assert store.acquire_idempotency(held_record(key, token, now), now)
    store.complete_idempotency_many([IdempotencyCompletion("d", "7.1.y", now, now + 100, None)])
    # a: its token starts "7.1."; b: another attempt; c: another delivery; d: completed.
    held = [("a", "7.1."), ("b", "7.1."), ("c", "7.1."), ("d", "7.1.")]
    assert store.release_idempotency_many(held) == 1
    assert [k for k in "abcd" if store.idempotency_record(k) is None] == ["a"]
    assert store.release_idempotency_many([("b", "7.2.x")]) == 1  # a whole token
    assert store.release_idempotency_many([]) == 0
