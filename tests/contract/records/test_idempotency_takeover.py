"""@idempotent keys held by a lease: retried while held, taken over once the lease ran out,
and a stale holder that changes nothing.

Each test delivers the same event several times through the full attempt path (claim,
run, record), as a platform redelivering it would, and counts the side effects. A
delivery that must still be running while another arrives runs in a thread that blocks
on an Event; time moves only by `clock.advance`.
"""

from __future__ import annotations

import threading

import pytest

from oncefire import App, RecordHeldError, idempotent
from oncefire.events import Event
from oncefire.idempotency import TAKE_OVER_AFTER, IdempotencySpec, _acquire, _finish, _Hold
from oncefire.stores.base import IdempotencyRecord
from oncefire.testing import TestClock, deliver
from tests.contract.records.idempotency_support import (
    LEASE,
    POLICY,
    RACERS,
    WAIT,
    Boom,
    Gate,
    charge_function,
    deliver_in_background,
    message_event,
    order_event,
    outcomes,
    record_of,
    rescue,
)


def test_key_held_by_a_live_lease_is_a_transient_failure_retried_after_the_lease(
    app: App, clock: TestClock
) -> None:
    charges = charge_function(app)
    charges.gate.is_armed = True
    event = order_event()
    first = deliver_in_background(app, "charge", event, charges.gate)
    clock.advance(10)
    summary = deliver(app, "charge", event, times=1)
    assert summary["failed"] == 1
    errors = [a["error"] for a in app.store.attempts(event.id) if a["outcome"] == "failed"]
    assert "RecordHeldError" in errors[0]
    first.finish()
    assert charges.calls == [event.id]
    # The retry is due when the holder's lease would end (20 s on), not on the backoff (60 s).
    clock.advance(19)
    assert app.drain().attempts == 0
    clock.advance(1)
    assert app.drain()["succeeded"] == 1
    assert charges.calls == [event.id]
    assert charges.results == ["ch_1", "ch_1"]
    assert app.stats()["charge"].dedupe_hits == 1


def test_held_key_is_retried_even_when_exceptions_are_listed_as_permanent(
    app: App, clock: TestClock
) -> None:
    charges = charge_function(app, permanent_errors=(Exception,))
    charges.gate.is_armed = True
    event = order_event()
    first = deliver_in_background(app, "charge", event, charges.gate)
    assert deliver(app, "charge", event, times=1)["failed"] == 1
    first.finish()
    assert app.dead_letters.count() == 0
    clock.advance(LEASE + TAKE_OVER_AFTER)
    assert app.drain()["succeeded"] == 1
    assert charges.results == ["ch_1", "ch_1"]


def test_expired_lease_is_taken_over_and_the_work_finished(app: App, clock: TestClock) -> None:
    charges = charge_function(app)
    charges.gate.is_armed = True
    event = order_event()
    holder = deliver_in_background(app, "charge", event, charges.gate)  # then its worker dies
    clock.advance(
        LEASE + TAKE_OVER_AFTER
    )  # both the delivery's lease and the claim's lease run out
    rescue(app, clock)
    assert outcomes(app, event.id, "charge") == ["crashed", "succeeded"]
    assert charges.calls == [event.id], "the taken-over key must run, not be skipped"
    assert charges.results == ["ch_1"]
    record = record_of(app, event.id)
    assert record is not None and record.status == "completed"
    holder.gate.is_armed = False
    holder.finish()


def test_stale_holder_that_completes_after_a_takeover_changes_nothing(
    app: App, clock: TestClock
) -> None:
    charges = charge_function(app)
    charges.gate.is_armed = True
    event = order_event()
    stale = deliver_in_background(app, "charge", event, charges.gate)
    clock.advance(LEASE + TAKE_OVER_AFTER)
    rescue(app, clock)  # the retry takes the key over and completes it: ch_1
    assert outcomes(app, event.id, "charge") == ["crashed", "succeeded"]
    taken_over = record_of(app, event.id)
    stale.finish()  # the paused holder wakes up, runs on and returns ch_2
    assert charges.results == ["ch_1", "ch_2"]
    assert record_of(app, event.id) == taken_over
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert charges.results[-1] == "ch_1", "a duplicate must see the owner's result"


def test_stale_holder_that_fails_after_a_takeover_releases_nothing(
    app: App, clock: TestClock
) -> None:
    calls: list[int] = []
    gate = Gate()

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE)
    def charge(event: Event) -> str:
        calls.append(1)
        number = len(calls)
        gate.hold()
        if number == 1:
            raise Boom("the paused holder fails late")
        return "ok"

    event = order_event()
    stale = deliver_in_background(app, "charge", event, gate)
    clock.advance(LEASE + TAKE_OVER_AFTER)
    rescue(app, clock)
    assert outcomes(app, event.id, "charge") == ["crashed", "succeeded"]
    stale.finish()
    record = record_of(app, event.id)
    assert record is not None and record.status == "completed"
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert len(calls) == 2


def test_stale_holder_that_fails_while_the_new_holder_runs_keeps_its_claim(
    app: App, clock: TestClock
) -> None:
    stale_gate, owner_gate = Gate(), Gate()
    calls: list[int] = []
    effects: list[int] = []

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    @idempotent(lease=LEASE)
    def charge(event: Event) -> str:
        calls.append(1)
        number = len(calls)
        if number == 1:
            stale_gate.hold()
            raise Boom("the paused holder fails late")
        if number == 2:
            owner_gate.hold()
        effects.append(number)
        return "ok"

    event = order_event()
    stale = deliver_in_background(app, "charge", event, stale_gate)
    clock.advance(LEASE + TAKE_OVER_AFTER)
    owner = deliver_in_background(app, "charge", event, owner_gate)  # takes the key over
    stale.finish()  # fails late: its release must not free the owner's claim
    assert deliver(app, "charge", event, times=1)["failed"] == 1, "the key is still held"
    owner.finish()
    assert effects == [2]
    clock.advance(LEASE + 60)
    app.drain()
    assert effects == [2]
    assert {state for _, state, _ in app.store.delivery_states(event.id)} == {"succeeded"}


def test_holder_completing_between_a_duplicates_read_and_its_takeover_keeps_its_result(
    app: App, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    event = message_event("e1", amount=500)
    holder = _acquire(app.runtime, spec, event)
    clock.advance(
        LEASE + TAKE_OVER_AFTER
    )  # the holder stalls past its lease, then wakes up and completes
    read = app.store.idempotency_record

    def read_then_holder_completes(key: str) -> IdempotencyRecord | None:
        record = read(key)
        if record is not None and record.token == holder.token and record.status != "completed":
            _finish(app.runtime, spec, holder, "first")
        return record

    monkeypatch.setattr(app.store, "idempotency_record", read_then_holder_completes)
    duplicate = _acquire(app.runtime, spec, event)
    assert duplicate.is_done and duplicate.result == "first", "it must not take over"
    record = read(holder.key)
    assert record is not None and (record.status, record.token) == ("completed", holder.token)


def race_takeovers_against_a_late_completion(
    app: App, spec: IdempotencySpec, holder: _Hold, event: Event
) -> list[str]:
    """RACERS duplicates of event claim its key while its stale holder completes, all at
    once; what each duplicate's claim returned."""
    barrier = threading.Barrier(RACERS + 1)
    got: list[str] = []
    lock = threading.Lock()

    def duplicate() -> None:
        barrier.wait(WAIT)
        try:
            claim = _acquire(app.runtime, spec, event)
        except RecordHeldError:
            outcome = "held"
        else:
            outcome = f"done:{claim.result}" if claim.is_done else "claimed"
        with lock:
            got.append(outcome)

    def complete() -> None:
        barrier.wait(WAIT)
        _finish(app.runtime, spec, holder, "late")

    threads = [threading.Thread(target=duplicate) for _ in range(RACERS)]
    threads.append(threading.Thread(target=complete))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert len(got) == RACERS
    return got


def test_takeovers_racing_the_stale_holders_completion_leave_one_owner(
    app: App, clock: TestClock
) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    for n in range(5):
        event = message_event(f"e{n}", amount=500)
        holder = _acquire(app.runtime, spec, event)
        clock.advance(LEASE + TAKE_OVER_AFTER)
        got = race_takeovers_against_a_late_completion(app, spec, holder, event)
        record = record_of(app, event.id, helper=spec.helper)
        assert record is not None
        if record.token == holder.token:  # the completion came first: every duplicate sees it
            assert record.status == "completed"
            assert got == ["done:late"] * RACERS
        else:  # one duplicate took the key over; the late completion was discarded
            assert record.status == "in_progress"
            assert sorted(got) == ["claimed"] + ["held"] * (RACERS - 1)


def test_a_key_that_changes_hands_throughout_a_claim_is_retried_later(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    # Each time: the claim meets a live record, which is released before it is read.
    monkeypatch.setattr(app.store, "acquire_idempotency", lambda record, now: False)
    monkeypatch.setattr(app.store, "idempotency_record", lambda key: None)
    with pytest.raises(RecordHeldError, match="changed hands 5 times") as caught:
        _acquire(app.runtime, spec, message_event("e1", amount=500))
    assert caught.value.delay is None  # retried on the backoff, not at a lease's end
