"""Issue 11 point 24: when a worker dies, only a delivery that may have run is charged an
attempt, and a delivery that kills its process still reaches the dead letters after its
attempts.

A worker marks queued deliveries started a wave ahead in one commit (a commit an attempt would
cost a disk flush each). A dead worker's wave is handed back uncharged and marked solo; a solo
delivery is leased alone, by a worker holding nothing else, so its next crash is its own and
is charged. Two Apps on one store stand for two worker processes; a worker that is never used
again stands for a dead process.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from oncefire import App, RetryPolicy
from oncefire.engine import execution
from oncefire.engine.rescue import rescue
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.stores.base import Leased
from oncefire.testing import TestClock
from tests.contract.worker_support import WAIT, app_of, learned_worker, turn_until

LEASE = 30.0


class Runs:
    """A function registered on several apps: counts executions by event id. An event whose
    data has "block" waits in its first run, and one with "kill" in every run, until the test
    ends: a process that died during it never records it."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.started = threading.Semaphore(0)
        self.gate = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.count[event.id] += 1
            first = self.count[event.id] == 1
        data = event.data.data
        if (first and data.get("block")) or data.get("kill"):
            self.started.release()
            assert self.gate.wait(WAIT * 3), "the test never released the gate"

    def register(self, app: App) -> None:
        policy = RetryPolicy(max_attempts=3, first_delay=0.0)
        app.on_message("t", name="f", retry_policy=policy)(self)


@pytest.fixture
def runs() -> Iterator[Runs]:
    runs = Runs()
    yield runs
    runs.gate.set()  # let the threads of the dead workers end


def worker_of(make_app: Callable[..., App], runs: Runs, concurrency: int = 1) -> Worker:
    """A worker of a fresh App (a process) that leases and marks started far ahead of its
    slots."""
    app = make_app()
    runs.register(app)
    return learned_worker(app, concurrency)


def outcomes(app: App, event_id: str) -> list[str]:
    return [a["outcome"] for a in app.store.attempts(event_id)]


def publish(app: App, *data: dict[str, Any]) -> list[str]:
    return [app.publish("t", d) for d in data]


def test_a_dead_workers_wave_marked_ahead_is_not_charged(
    make_app: Callable[..., App], clock: TestClock, runs: Runs
) -> None:
    worker = worker_of(make_app, runs)
    blocked, *queued = publish(app_of(worker), {"block": True}, {}, {}, {})
    # One commit leases the four, marks blocked started (it starts alone) and, ahead, the
    # rest (they wait in the queue).
    assert worker.lease_and_start() == 4
    turn_until(worker, "blocked to start", lambda: runs.started.acquire(blocking=False))
    clock.advance(LEASE + 1)  # the process dies during blocked
    second = make_app()
    runs.register(second)
    second.drain()
    assert outcomes(second, blocked) == ["crashed", "succeeded"]  # it ran: charged
    for event_id in queued:
        assert outcomes(second, event_id) == ["succeeded"], event_id
        assert second.store.delivery_states(event_id)[0][1:] == ("succeeded", 1)
    assert runs.count == {blocked: 2, **dict.fromkeys(queued, 1)}


def serve_until_killed(worker: Worker, runs: Runs) -> bool:
    """Run a worker (a fresh process: it rescues first) until a run that ends its process
    starts (True: it is never used again) or it has nothing left to do (False)."""
    worker.maintain(force=True)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if runs.started.acquire(blocking=False):
            return True
        leased = worker.lease_and_start()
        if leased == 0 and not worker.is_busy:
            return False
        worker.collect(0.01)
    pytest.fail("the worker neither finished nor died")


def test_a_delivery_that_kills_its_process_is_charged_only_for_runs_alone(
    make_app: Callable[..., App], clock: TestClock, runs: Runs
) -> None:
    worker = worker_of(make_app, runs)
    quick, mate, killer, last = publish(app_of(worker), {}, {}, {"kill": True}, {})
    assert worker.lease_and_start() == 4
    # quick ends: a commit records it and marks mate started and, ahead, killer and last.
    # mate ends; killer starts with no commit of its own, and its process dies.
    turn_until(worker, "the killer to start", lambda: runs.started.acquire(blocking=False))
    worker.write_ended()  # mate's success reached the store just before the death
    assert outcomes(app_of(worker), mate) == ["succeeded"]
    deaths = 1
    while deaths < 10:
        clock.advance(LEASE + 1)
        if not serve_until_killed(worker_of(make_app, runs), runs):
            break
        deaths += 1
    # Its run in the wave is not charged (which of the wave ended the process is not known);
    # then each run alone is, and after 3 it is a dead letter.
    assert outcomes(app_of(worker), killer) == ["crashed"] * 3
    assert app_of(worker).store.delivery_states(killer)[0][1:] == ("dead", 3)
    assert runs.count[killer] == deaths == 4
    for event_id in (quick, mate, last):  # last was marked ahead: it runs once, uncharged
        assert outcomes(app_of(worker), event_id) == ["succeeded"], event_id
        assert runs.count[event_id] == 1


def lease_f(app: App, clock: TestClock, worker: str, **options: Any) -> list[Leased]:
    """Lease up to 10 due deliveries of function f to worker, now."""
    now = clock.now()
    return app.store.lease_due(
        worker=worker,
        now=now,
        lease_until=now + LEASE,
        limit=10,
        functions=["f"],
        caps={},
        **options,
    )


@pytest.mark.parametrize("marked_by", ["start", "lease"])
def test_a_solo_delivery_is_leased_only_alone_and_first(
    app: App, clock: TestClock, marked_by: str
) -> None:
    """A dead worker's deliveries marked ahead, by start() or by the lease itself, come back
    solo."""
    runs = Runs()
    runs.register(app)
    store = app.store
    first, second = publish(app, {}, {})

    def lease(is_alone: bool) -> list[str]:
        return [c.event.id for c in lease_f(app, clock, "w", is_alone=is_alone)]

    now = clock.now()
    held = lease_f(app, clock, "dead", is_ahead=marked_by == "lease")
    assert len(held) == 2
    if marked_by == "start":
        assert store.start([c.lease for c in held], now, is_ahead=True) == {
            c.lease.delivery_id for c in held
        }
    clock.advance(LEASE + 1)
    assert rescue(app.runtime, ["f"]) == (2, 0)  # handed back uncharged, solo
    (later,) = publish(app, {})
    assert lease(is_alone=False) == []  # a worker holding something never takes a solo one
    assert lease(is_alone=True) == [first]  # alone, it takes the first solo one, only
    assert lease(is_alone=False) == []
    assert lease(is_alone=True) == [second]
    assert lease(is_alone=False) == [later]  # the due ones before the first solo one
    assert store.delivery_states(first)[0][1:] == ("running", 1)  # its first charged attempt


def test_deliveries_that_start_together_are_charged_only_once_confirmed_started(
    make_app: Callable[..., App], clock: TestClock, runs: Runs
) -> None:
    def dies_running_two(*data: dict[str, Any], confirm: bool) -> list[str]:
        # Two slots start two deliveries right after one commit: which of them could have
        # ended the process is not known until a later commit confirms that both run.
        worker = worker_of(make_app, runs, concurrency=2)
        ids = publish(app_of(worker), *data)
        assert worker.lease_and_start() == 2
        for _ in ids:
            assert runs.started.acquire(timeout=WAIT)
        if confirm:
            worker.renew()  # a later commit (here the renewal) confirms them started
        clock.advance(LEASE + 1)  # the process dies
        rescuer = make_app()
        runs.register(rescuer)
        rescuer.drain()
        return ids

    together = dies_running_two({"block": True}, {"block": True}, confirm=False)
    for event_id in together:  # handed back uncharged; each ran again alone
        assert outcomes(make_app(), event_id) == ["succeeded"], event_id
    confirmed = dies_running_two({"block": True}, {"block": True}, confirm=True)
    for event_id in confirmed:
        assert outcomes(make_app(), event_id) == ["crashed", "succeeded"], event_id
    assert runs.count == dict.fromkeys(together + confirmed, 2)


def test_a_later_commit_confirms_only_attempts_whose_function_was_entered(
    make_app: Callable[..., App],
    clock: TestClock,
    runs: Runs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two slots start two deliveries marked ahead; one thread enters its function, the other
    # has not called its function yet when a commit (the renewal) comes and the process dies
    # (a wave-mate's os._exit): only the entered one may have run, so only it is charged.
    worker = worker_of(make_app, runs, concurrency=2)
    held_back, entered = threading.Event(), threading.Semaphore(0)
    call = execution.call

    def call_or_hold(*args: Any) -> Any:
        event = args[2]
        if event.data.data.get("held"):
            assert held_back.wait(WAIT * 3), "the test never released the held thread"
        entered.release()
        return call(*args)

    monkeypatch.setattr(execution, "call", call_or_hold)
    ran, held = publish(app_of(worker), {"block": True}, {"held": True})
    assert worker.lease_and_start() == 2
    assert entered.acquire(timeout=WAIT) and runs.started.acquire(timeout=WAIT)
    worker.renew()  # confirms the entered one only
    clock.advance(LEASE + 1)  # the process dies
    monkeypatch.setattr(execution, "call", call)
    rescuer = make_app()
    runs.register(rescuer)
    rescuer.drain()
    assert outcomes(make_app(), ran) == ["crashed", "succeeded"]
    assert outcomes(make_app(), held) == ["succeeded"]  # handed back uncharged, solo
    held_back.set()


@pytest.mark.parametrize(
    ("published", "free", "started"),
    [(3, 1, 1), (1, 8, 1), (3, 8, 0), (3, 0, 0)],
    ids=["one-slot", "only-one", "together", "no-slots-said"],
)
def test_a_lease_marks_its_head_started_when_it_starts_alone_and_the_rest_ahead(
    app: App, clock: TestClock, published: int, free: int, started: int
) -> None:
    runs = Runs()
    runs.register(app)
    ids = publish(app, *({} for _ in range(published)))
    held = lease_f(app, clock, "dead", is_ahead=True, free=free)
    assert [c.event.id for c in held] == ids
    clock.advance(LEASE + 1)
    later = clock.now()
    taken = app.store.take_expired_leases(later, later + LEASE, ["f"], 10)
    marks = {c.event.id: (c.is_started, c.is_ahead) for c in taken}
    assert marks == {
        event_id: (True, i >= started) for i, event_id in enumerate(ids)
    }  # started (charged if lost) or ahead (handed back solo)
