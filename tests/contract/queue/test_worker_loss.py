"""Issue 11's worker-side loss and duplicate paths: a batch-mate, a queued delivery, a running
attempt or an ended one is never run twice or lost because of something else the worker holds.

Each test counts the executions of every event (must be exactly one unless said otherwise).
Two Apps on one store stand for two worker processes; a Gate holds a function in its run.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App, Retry, RetryPolicy
from oncefire.engine import execution as execution_module
from oncefire.engine.worker import Worker
from oncefire.errors import ConfigError, StoreError, StoreUnavailableError
from oncefire.events import Event
from oncefire.stores.base import Ending, Lease
from oncefire.testing import TestClock
from oncefire.triggers import Options, Trigger

WAIT = 10.0  # longest a test waits for another thread before it fails
LEASE = 30.0


def wait_for(what: str, check: Callable[[], object], timeout: float = WAIT) -> None:
    """Poll check() until it is truthy; fail after timeout."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


class Runs:
    """A function registered on several apps: counts executions by event id; an event whose
    data has "block" waits for release() on its first execution."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.started = threading.Event()
        self.gate = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.count[event.id] += 1
            first = self.count[event.id] == 1
        if first and event.data.data.get("block"):
            self.started.set()
            assert self.gate.wait(WAIT), "the test never released the gate"

    def register(self, app: App) -> None:
        app.on_message("t", name="f", retry_policy=RetryPolicy(first_delay=0.0))(self)

    def release(self) -> None:
        self.gate.set()


def two_workers(make_app: Callable[..., App], **first_settings: Any) -> tuple[Runs, App, App]:
    """Runs registered on two Apps on one store: two worker processes."""
    runs = Runs()
    first, second = make_app(**first_settings), make_app()
    runs.register(first)
    runs.register(second)
    return runs, first, second


def prefetching(app: App, concurrency: int = 1) -> Worker:
    """A worker that has learned its attempts are short, so it leases ahead of its slots."""
    worker = Worker(app.runtime, concurrency=concurrency)
    for _ in range(20):
        worker.attempts.learn(0.0001)
    return worker


def finish(worker: Worker) -> None:
    """Run a worker's loop until it holds nothing."""
    deadline = time.monotonic() + WAIT
    while worker.is_busy and time.monotonic() < deadline:
        worker.lease_and_start()
        worker.collect(0.02)
    assert not worker.is_busy


def publish(app: App, *data: dict[str, Any]) -> list[str]:
    return [app.publish("t", d) for d in data]


# -- 7: one bad value poisons a whole batch ---------------------------------------------------

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": NAN},
        {"timeout": INF},
        {"timeout": "10"},
        {"timeout": True},
        {"timeout": -1},
        {"timeout": 0},
        {"max_instances": 0},
        {"max_instances": -1},
        {"max_instances": 1.5},
        {"max_instances": True},
        {"max_instances": "2"},
        {"max_event_age": NAN},
        {"max_event_age": -1},
        {"max_event_age": "60"},
        {"retry": "yes"},
        {"permanent_errors": ValueError},
        {"permanent_errors": ("ValueError",)},
    ],
    ids=repr,
)
def test_every_bad_option_is_a_config_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"\.$"):
        Options(**options)


@pytest.mark.parametrize(
    "fields",
    [
        {"first_delay": NAN},
        {"first_delay": INF},
        {"first_delay": -1},
        {"max_delay": NAN},
        {"max_delay": INF},
        {"max_delay": -1},
        {"multiplier": NAN},
        {"multiplier": INF},
        {"jitter": NAN},
        {"max_attempts": 0},
        {"max_attempts": -1},
        {"max_attempts": 2.5},
        {"max_attempts": True},
        {"first_delay": "60"},
    ],
    ids=repr,
)
def test_every_bad_retry_policy_field_is_a_config_error(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"\.$"):
        RetryPolicy(**fields)


def test_a_non_callable_function_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot be called"):
        Trigger("f", 42, "message", "t", ("message.published",), Options())  # type: ignore[arg-type]


def test_a_lone_surrogate_a_nul_and_retry_nan_poison_no_batch_mate(app: App) -> None:
    runs = Runs()

    @app.on_message("t")
    def mixed(event: Event) -> None:
        runs(event)
        kind = event.data.data.get("kind")
        if kind == "surrogate":
            raise RuntimeError("bad \ud800 text")
        if kind == "nul":
            raise RuntimeError("bad \x00 text")
        if kind == "nan":
            raise Retry(delay=NAN)
        if kind == "inf":
            raise Retry(delay=INF)

    ids = publish(app, {"n": 1}, {"kind": "surrogate"}, {"n": 2}, {"kind": "nul"})
    ids += publish(app, {"kind": "nan"}, {"n": 3}, {"kind": "inf"})
    app.drain()
    assert runs.count == dict.fromkeys(ids, 1)
    states = {i: app.store.delivery_states(i)[0][1:] for i in ids}
    assert [states[ids[n]] for n in (0, 2, 5)] == [("succeeded", 1)] * 3
    assert [states[ids[n]] for n in (1, 3, 4, 6)] == [("pending", 1)] * 4
    errors = {i: app.store.attempts(i)[0]["error"] for i in ids}
    assert "bad \ufffd text" in errors[ids[1]]
    assert "bad \\x00 text" in errors[ids[3]]
    assert app.store.next_due(["mixed"]) == pytest.approx(app.clock.now() + 60)
    clock = app.clock
    assert isinstance(clock, TestClock)
    clock.advance(60)  # the retries asked with NaN and infinity are due after the policy's
    app.drain()
    assert runs.count[ids[4]] == runs.count[ids[6]] == 2


def test_a_record_the_store_still_refuses_is_a_dead_letter_and_its_mates_are_recorded(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = Runs()

    @app.on_message("t")
    def mixed(event: Event) -> None:
        runs(event)
        if event.data.data.get("fail"):
            raise RuntimeError("unrecordable")

    store: Any = app.store
    real_retry = store.retry

    def refusing_retry(lease: Lease, result: Ending, run_at: float) -> bool:
        if "unrecordable" in (result.error or ""):
            raise StoreError("The store refused this record.")
        return bool(real_retry(lease, result, run_at))

    monkeypatch.setattr(store, "retry", refusing_retry)
    ids = publish(app, {"n": 1}, {"fail": True}, {"n": 2})
    app.drain()
    app.drain()
    assert runs.count == dict.fromkeys(ids, 1)
    assert [app.store.delivery_states(i)[0][1] for i in ids] == ["succeeded", "dead", "succeeded"]
    (letter,) = app.dead_letters.list()
    assert "could not write attempt 1" in (letter.error or "")
    assert "The store refused this record." in (letter.error or "")


def test_a_record_cut_off_by_an_unavailable_store_is_recorded_later_not_buried(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that is briefly unreachable (a database restart) is no fault of the record:
    the attempt is recorded once the store answers, never made a dead letter."""
    runs = Runs()

    @app.on_message("t")
    def flaky(event: Event) -> None:
        runs(event)
        raise RuntimeError("try again")

    store: Any = app.store
    real_retry = store.retry
    outages = [2]  # the next two records meet a store that is down

    def unavailable_then_real(lease: Lease, result: Ending, run_at: float) -> bool:
        if outages[0] > 0:
            outages[0] -= 1
            raise StoreUnavailableError("The store is unavailable: the server is restarting.")
        return bool(real_retry(lease, result, run_at))

    monkeypatch.setattr(store, "retry", unavailable_then_real)
    (event_id,) = publish(app, {"n": 1})
    for _ in range(3):
        try:
            app.drain()
        except StoreUnavailableError:
            continue  # the outage reaches the caller of drain(); the record waits
    assert runs.count == {event_id: 1}
    assert app.store.delivery_states(event_id) == [("flaky", "pending", 1)]
    assert app.dead_letters.count() == 0


# -- 8: a queued delivery whose lease was lost never starts ------------------------------------


def test_a_queued_delivery_whose_lease_was_lost_is_dropped_before_it_starts(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    runs, first, second = two_workers(make_app)
    ids = publish(first, {"block": True}, {"n": 1}, {"n": 2})
    worker = prefetching(first)
    assert worker.lease_and_start() == 3  # one running, two waiting for its thread
    assert worker.attempts.has_waiting()
    assert runs.started.wait(WAIT)
    clock.advance(LEASE + 1)  # this worker stalls past its leases; another rescues them all
    second.drain()
    worker.maintain(force=True)  # its renewal fails: it learns it lost them
    runs.release()
    finish(worker)
    # The running one ran twice (at-least-once); the queued ones once, elsewhere.
    assert [runs.count[i] for i in ids] == [2, 1, 1]


# -- 9: shutdown hands back only what never started ---------------------------------------------


def test_shutdown_keeps_the_lease_of_an_attempt_still_running(
    make_app: Callable[..., App],
) -> None:
    runs, first, second = two_workers(make_app, shutdown_grace=0.1)
    running, queued = publish(first, {"block": True}, {"n": 1})
    worker = prefetching(first)
    assert worker.lease_and_start() == 2
    assert worker.attempts.has_waiting()  # the queued one waits for the only thread
    assert runs.started.wait(WAIT)
    worker.shutdown()
    assert first.store.delivery_states(running)[0][1:] == ("running", 1)
    assert first.store.delivery_states(queued)[0][1:] == ("pending", 0)
    second.drain()  # another worker takes the queued one, never the running one
    runs.release()
    assert runs.count == {running: 1, queued: 1}


# -- 10: drain renews and sweeps while busy ------------------------------------------------------


def test_drain_renews_the_lease_of_an_attempt_longer_than_the_lease(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    runs, first, second = two_workers(make_app, renew_every=0.01)
    (event_id,) = publish(first, {"block": True})
    drained = threading.Thread(target=first.drain)
    drained.start()
    assert runs.started.wait(WAIT)
    for _ in range(3):  # the attempt runs for 1.8 leases
        clock.advance(LEASE * 0.6)
        wait_for(
            "the lease to be renewed",
            lambda: not first.store.expired_leases(clock.now() + LEASE / 2, ["f"], 10),
        )
        second.drain()  # finds nothing to rescue
    runs.release()
    drained.join(WAIT)
    assert runs.count == {event_id: 1}
    assert first.store.delivery_states(event_id)[0][1:] == ("succeeded", 1)


def test_drain_rescues_a_dead_workers_delivery_while_its_own_attempt_runs(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    runs, first, dead = two_workers(make_app, renew_every=0.01, sweep_every=0.01)
    (orphan,) = publish(dead, {"n": 1})
    now = clock.now()
    (held,) = dead.store.lease_due(
        worker="dead", now=now, lease_until=now + 1, limit=1, functions=["f"], caps={}
    )
    assert held.event.id == orphan
    dead.store.start([held.lease], now)  # the dead worker had started it, then died
    (long_running,) = publish(first, {"block": True})
    drained = threading.Thread(target=first.drain)
    drained.start()
    try:
        assert runs.started.wait(WAIT)
        clock.advance(2)  # the dead worker's lease runs out; the drain's own lease holds
        wait_for("the drain to rescue and run the orphan", lambda: runs.count[orphan] == 1)
        assert first.store.delivery_states(long_running)[0][1] == "running"
    finally:
        runs.release()
        drained.join(WAIT)
    assert not drained.is_alive()
    assert runs.count == {orphan: 1, long_running: 1}
    outcomes = [a["outcome"] for a in first.store.attempts(orphan)]
    assert outcomes == ["crashed", "succeeded"]
    assert first.store.delivery_states(long_running)[0][1:] == ("succeeded", 1)


# -- 11: an error outside the function is a failed attempt ---------------------------------------


def test_an_error_building_the_event_is_a_failed_attempt_with_its_cause(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = Runs()
    runs.register(app)
    broken, fine = publish(app, {"broken": True}, {"n": 1})
    real_build = execution_module.build_event

    def build_event(trigger: Any, leased: Any) -> Event:
        if leased.event.id == broken:
            raise RuntimeError("the event could not be built")
        return real_build(trigger, leased)

    monkeypatch.setattr(execution_module, "build_event", build_event)
    app.drain()
    assert runs.count == {fine: 1}
    attempts = app.store.attempts(broken)  # retried at once (first_delay=0), then buried
    assert [a["outcome"] for a in attempts] == ["failed"] * 6
    assert "the event could not be built" in attempts[0]["error"]
    assert app.store.delivery_states(broken)[0][1:] == ("dead", 6)


# -- 12: ended attempts are recorded at once; no process hoards the backlog ----------------------


def serve_in_background(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run)
    thread.start()
    return thread


def test_an_ended_attempt_is_recorded_while_others_run_and_wait(
    make_app: Callable[..., App],
) -> None:
    runs = Runs()
    app = make_app(poll_interval=0.01)
    runs.register(app)
    quick, blocked, queued = publish(app, {"n": 1}, {"block": True}, {"n": 2})
    worker = prefetching(app)
    served = serve_in_background(worker)
    try:
        assert runs.started.wait(WAIT)
        wait_for(
            "the quick attempt to be recorded",
            lambda: app.store.delivery_states(quick)[0][1] == "succeeded",
        )
    finally:
        runs.release()
        worker.stop_requested.set()
        served.join(WAIT)
    assert runs.count[quick] == runs.count[blocked] == 1 and runs.count[queued] <= 1


@pytest.mark.slow
def test_a_second_worker_gets_work_while_the_first_is_busy(make_app: Callable[..., App]) -> None:
    runs, first, second = two_workers(make_app, poll_interval=0.01)
    blocked, *rest = publish(first, {"block": True}, *({"n": n} for n in range(4)))
    worker = prefetching(first)
    served = serve_in_background(worker)
    try:
        assert runs.started.wait(WAIT)

        def second_ran_the_rest() -> bool:
            second.drain()
            return all(runs.count[i] == 1 for i in rest)

        wait_for("the second worker to run the backlog", second_ran_the_rest)
    finally:
        runs.release()
        worker.stop_requested.set()
        served.join(WAIT)
    assert runs.count == dict.fromkeys([blocked, *rest], 1)


# -- 24: only a delivery that may have run is charged when its worker dies -----------------------


def test_deliveries_a_dead_worker_held_but_never_started_are_not_charged(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    runs, first, second = two_workers(make_app)
    blocked, *queued = publish(first, {"block": True}, *({"n": n} for n in range(5)))
    worker = prefetching(first)
    assert worker.lease_and_start() == 6  # one running, five waiting for its thread
    assert worker.attempts.has_waiting()
    assert runs.started.wait(WAIT)
    clock.advance(LEASE + 1)  # its process dies (this worker is never used again)
    second.drain()
    runs.release()
    assert [a["outcome"] for a in second.store.attempts(blocked)] == ["crashed", "succeeded"]
    for event_id in queued:
        assert [a["outcome"] for a in second.store.attempts(event_id)] == ["succeeded"]
        assert second.store.delivery_states(event_id)[0][1:] == ("succeeded", 1)
    assert runs.count == {blocked: 2, **dict.fromkeys(queued, 1)}


def test_a_delivery_leased_to_wait_for_a_busy_thread_is_not_charged_when_its_worker_dies(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    runs, first, second = two_workers(make_app)
    quick, blocked = publish(first, {"n": 0}, {"block": True})
    worker = prefetching(first)
    assert worker.lease_and_start() == 2  # quick runs, blocked waits for the only thread
    assert runs.started.wait(WAIT)  # quick ended; blocked runs
    assert worker.collect(WAIT) == 1
    (late,) = publish(first, {"n": 1})
    # No slot is free, but attempts end: it is leased to wait for the thread, marked ahead
    # (whether it ran is not known if the worker dies), not started.
    assert worker.lease_and_start() == 1
    assert worker.attempts.has_waiting()
    clock.advance(LEASE + 1)  # its process dies (this worker is never used again)
    second.drain()
    runs.release()
    assert [a["outcome"] for a in second.store.attempts(blocked)] == ["crashed", "succeeded"]
    assert [a["outcome"] for a in second.store.attempts(late)] == ["succeeded"]
    assert runs.count == {quick: 1, blocked: 2, late: 1}
