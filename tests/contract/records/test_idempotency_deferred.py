"""@idempotent records completed with the attempt (issue 18, point 11): a worker writes the
completion in the transaction that writes the attempt's ending, not in a statement of its
own; what an attempt completed is kept whatever becomes of it (it raised, it ran past its
timeout), and a completion that comes after its attempt was written is written at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from oncefire import App, idempotent
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.stores.base import Completed, Ending, IdempotencyCompletion, Lease
from oncefire.testing import deliver
from tests.contract.records.idempotency_support import (
    LEASE,
    POLICY,
    WAIT,
    Boom,
    order_event,
    outcomes,
    record_of,
)


def charging(effects: list[str]) -> Callable[[Event], str]:
    """An @idempotent helper `charge_once` whose effect (a charge) is listed in effects."""

    @idempotent(lease=LEASE)
    def charge_once(event: Event) -> str:
        effects.append(event.id)
        return "ch_1"

    return charge_once


def started(app: App, event: Any, entered: threading.Event) -> Worker:
    """A worker running `charge` on one delivery of event, once its function is entered."""
    with app.store.transaction() as tx:
        tx.append(event, [], app.clock.now())
        tx.mark_routed(event.id, "unrouted", None)
        tx.add_deliveries(event.id, ["charge"], app.clock.now())
    worker = Worker(app.runtime, functions=["charge"], concurrency=1)
    worker.lease_and_start()
    assert entered.wait(WAIT)
    return worker


def test_a_worker_completes_the_record_in_the_transaction_that_writes_the_attempt(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    effects: list[str] = []
    charge_once = charging(effects)

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def charge(event: Event) -> None:
        charge_once(event)

    store = app.store
    depth = 0
    completed_in: list[tuple[bool, list[str]]] = []  # (inside a batch, keys) per statement
    batch, complete_records = store.batch, store.complete_idempotency_many
    complete_many = store.complete_many

    @contextmanager
    def counted_batch() -> Iterator[None]:
        nonlocal depth
        with batch():
            depth += 1
            try:
                yield
            finally:
                depth -= 1

    def spied(completions: Sequence[IdempotencyCompletion]) -> set[str]:
        completed_in.append((depth > 0, [c.key for c in completions]))
        return complete_records(completions)

    def ending(items: Sequence[tuple[Lease, Ending]]) -> Completed:
        # The successes' records go with them (one statement on PostgreSQL).
        if keys := [c.key for _, e in items for c in e.completions]:
            completed_in.append((depth > 0, keys))
        return complete_many(items)

    monkeypatch.setattr(store, "batch", counted_batch)
    monkeypatch.setattr(store, "complete_idempotency_many", spied)
    monkeypatch.setattr(store, "complete_many", ending)
    event = order_event()
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    record = record_of(app, event.id, helper="charge_once")
    assert record is not None and record.status == "completed" and record.result_json == '"ch_1"'
    assert completed_in == [(True, [record.key])], "completed by a statement of its own"


def test_a_record_completed_before_the_function_raised_is_kept_with_the_failed_attempt(
    app: App,
) -> None:
    effects: list[str] = []
    results: list[str] = []
    fail = [True, False]  # the first attempt raises after its charge, the second succeeds
    charge_once = charging(effects)

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def charge(event: Event) -> None:
        results.append(charge_once(event))
        if fail.pop(0):
            raise Boom("the receipt could not be sent")

    event = order_event()
    summary = deliver(app, "charge", event, times=2)
    assert (summary["failed"], summary["succeeded"]) == (1, 1)
    assert effects == [event.id], "the charge ran again after its function raised"
    assert results == ["ch_1", "ch_1"]
    record = record_of(app, event.id, helper="charge_once")
    assert record is not None and record.status == "completed"


def test_a_record_completed_by_an_attempt_past_its_timeout_is_kept_with_the_timeout(
    app: App,
) -> None:
    effects: list[str] = []
    late = threading.Event()
    charge_once = charging(effects)

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=0.05)
    def charge(event: Event) -> None:
        charge_once(event)
        late.wait(0.3)  # past its timeout: written as timed out once its thread ends

    event = order_event()
    assert deliver(app, "charge", event, times=1)["timeout"] == 1
    record = record_of(app, event.id, helper="charge_once")
    assert record is not None and record.status == "completed"
    late.set()  # the next attempt finds the record completed and returns at once
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert effects == [event.id]
    assert outcomes(app, event.id, "charge") == ["timeout", "succeeded"]


def test_a_completion_after_its_attempt_was_written_is_written_at_once(app: App) -> None:
    effects: list[str] = []
    entered, go_on = threading.Event(), threading.Event()
    charge_once = charging(effects)

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=0.05)
    def charge(event: Event) -> None:
        entered.set()
        assert go_on.wait(WAIT)
        charge_once(event)

    event = order_event()
    worker = started(app, event, entered)
    try:
        time.sleep(0.1)  # past its deadline
        worker.collect(0.0)
        # What a process stuck on this attempt does before it exits.
        worker.write_overdue()
        assert outcomes(app, event.id, "charge") == ["timeout"]
        go_on.set()
        deadline = time.monotonic() + WAIT
        while worker.attempts.running and time.monotonic() < deadline:
            worker.collect(0.05)
        record = record_of(app, event.id, helper="charge_once")
        assert record is not None and record.status == "completed"
        assert effects == [event.id]
    finally:
        go_on.set()
        worker.shutdown()


def test_a_record_completed_after_its_worker_stopped_is_written_at_once(
    make_app: Callable[..., App],
) -> None:
    app = make_app(shutdown_grace=0.05)
    effects: list[str] = []
    charge_once = charging(effects)
    entered, go_on, done = threading.Event(), threading.Event(), threading.Event()

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def charge(event: Event) -> None:
        entered.set()
        assert go_on.wait(WAIT)
        charge_once(event)
        done.set()

    event = order_event()
    worker = started(app, event, entered)
    try:
        # Its grace over, the worker stops with the attempt running: its lease will run out.
        worker.shutdown()
    finally:
        go_on.set()
    assert done.wait(WAIT)
    record = record_of(app, event.id, helper="charge_once")
    assert record is not None and record.status == "completed", "a retry would charge again"
    assert effects == [event.id]
