"""TTL on every store: policies delete expired documents, and claim records expire."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from oncefire import App, Increment, idempotent
from oncefire.clock import to_datetime
from oncefire.events import Event
from oncefire.features import ttl
from oncefire.stores.documents.sql_tx import SqlTx
from oncefire.testing import TestClock, deliver, make_event

HOUR = 3600.0


def exists(app: App, path: str) -> bool:
    return app.db.document(path).get().exists


def test_workers_delete_documents_whose_expiry_has_passed(app: App, clock: TestClock) -> None:
    app.ttl("sessions", field="expires_at")
    now = clock.now()
    sessions = app.db.collection("sessions")
    sessions.document("past-datetime").set({"expires_at": to_datetime(now - 1)})
    sessions.document("past-seconds").set({"expires_at": now - 1})
    sessions.document("now").set({"expires_at": now})
    sessions.document("future").set({"expires_at": to_datetime(now + HOUR)})
    sessions.document("no-field").set({"user": "u1"})
    sessions.document("not-a-time").set({"expires_at": "tomorrow"})
    app.db.collection("carts").document("c1").set({"expires_at": now - 1})  # no policy

    app.drain()  # a worker sweeps when it starts, then every sweep_every seconds

    assert not exists(app, "sessions/past-datetime")
    assert not exists(app, "sessions/past-seconds")
    assert not exists(app, "sessions/now")
    for kept in ("sessions/future", "sessions/no-field", "sessions/not-a-time", "carts/c1"):
        assert exists(app, kept), kept
    clock.advance(HOUR)
    app.drain()
    assert not exists(app, "sessions/future")
    assert exists(app, "sessions/no-field")


def test_ttl_field_may_be_a_nested_path(app: App, clock: TestClock) -> None:
    app.ttl("sessions", field="meta.expires_at")
    app.db.document("sessions/s1").set({"meta": {"expires_at": clock.now() - 1}})
    app.drain()
    assert not exists(app, "sessions/s1")


def test_sweep_deletes_in_bounded_batches(app: App, clock: TestClock) -> None:
    app.ttl("sessions", field="expires_at")
    for n in range(5):
        app.db.document(f"sessions/s{n}").set({"expires_at": clock.now() - 1})
    assert [ttl.sweep(app.runtime, limit=2) for _ in range(4)] == [2, 2, 1, 0]
    assert app.db.collection("sessions").get() == []


def test_renewed_document_is_kept(app: App, clock: TestClock) -> None:
    app.ttl("sessions", field="expires_at")
    ref = app.db.document("sessions/s1")
    ref.set({"expires_at": clock.now() + 60})
    clock.advance(30)
    ref.update({"expires_at": clock.now() + 60})
    clock.advance(45)
    assert ttl.sweep(app.runtime) == 0
    assert exists(app, "sessions/s1")


def test_a_ttl_deletion_is_a_document_delete_with_its_event(app: App, clock: TestClock) -> None:
    deleted: list[str] = []

    @app.on_document_deleted("sessions/{sessionId}")
    def on_deleted(event: Event) -> None:
        deleted.append(event.params["sessionId"])

    app.ttl("sessions", field="expires_at")
    app.db.document("sessions/s1").set({"expires_at": clock.now() - 1})
    app.drain()
    app.drain()
    assert deleted == ["s1"]


def test_claim_records_expire_after_their_ttl(app: App, clock: TestClock) -> None:
    with app.db.transaction() as tx:
        assert tx.claim("k1", ttl=100)
    clock.advance(99)
    with app.db.transaction() as tx:
        assert not tx.claim("k1", ttl=100)
    clock.advance(1)
    with app.db.transaction() as tx:
        assert tx.claim("k1", ttl=100), "an expired claim is free again, swept or not"


def test_the_sweep_purges_expired_claim_records_in_bounded_batches(
    app: App, clock: TestClock
) -> None:
    with app.db.transaction() as tx:
        for n in range(3):
            tx.claim(f"short-{n}", ttl=10)
        tx.claim("long", ttl=1000)
    assert ttl.sweep(app.runtime) == 0
    clock.advance(10)
    assert ttl.sweep(app.runtime, limit=2) == 2
    assert ttl.sweep(app.runtime, limit=2) == 1
    assert ttl.sweep(app.runtime, limit=2) == 0
    with app.db.transaction() as tx:
        assert not tx.claim("long")


def test_default_claim_ttl_is_seven_days(app: App, clock: TestClock) -> None:
    with app.db.transaction() as tx:
        assert tx.claim("k1")
    clock.advance(timedelta(days=7).total_seconds() - 1)
    with app.db.transaction() as tx:
        assert not tx.claim("k1")
    clock.advance(1)
    with app.db.transaction() as tx:
        assert tx.claim("k1")


def test_idempotent_records_expire_after_their_ttl(app: App, clock: TestClock) -> None:
    calls: list[str] = []

    @app.on_message("payments", retry=False, timeout=30)
    @idempotent(lease=30, ttl=HOUR)
    def charge(event: Event) -> str:
        calls.append(event.id)
        return "ok"

    event = make_event("message.published", "payments", {"amount": 5}, time=clock.now())
    deliver(app, "charge", event, times=1)
    clock.advance(HOUR - 1)
    assert ttl.sweep(app.runtime) == 0
    deliver(app, "charge", event, times=1)
    assert calls == [event.id], "within its ttl a completed key is remembered"
    clock.advance(1)
    assert ttl.sweep(app.runtime) == 1
    deliver(app, "charge", event, times=1)
    assert calls == [event.id, event.id], "after its ttl the key is forgotten"


def test_a_tx_claim_in_a_function_expires_with_its_record(app: App, clock: TestClock) -> None:
    @app.on_message("payments")
    def count(event: Event) -> None:
        with app.db.transaction() as tx:
            if tx.claim(event.id, ttl=HOUR):
                tx.set(app.db.document("stats/payments"), {"n": Increment(1)}, merge=True)

    event = make_event("message.published", "payments", {"amount": 5})
    deliver(app, "count", event, times=2)
    assert app.db.document("stats/payments").get().get("n") == 1
    clock.advance(HOUR)
    app.drain()  # the worker's sweep purges the record
    deliver(app, "count", event, times=1)
    assert app.db.document("stats/payments").get().get("n") == 2


def test_registration_refuses_a_claim_ttl_shorter_than_age_plus_retry_window(app: App) -> None:
    from oncefire import ConfigError, RetryPolicy

    policy = RetryPolicy(max_attempts=6, first_delay=60, multiplier=2)  # window 1860 s
    with pytest.raises(ConfigError, match=r"at least 5460 s"):

        @app.on_message("payments", retry_policy=policy, max_event_age=HOUR)
        @idempotent(ttl=HOUR)
        def charge(event: Event) -> None:
            pass

    assert "charge" not in app.triggers


def test_documents_written_before_the_policy_are_swept(app: App, clock: TestClock) -> None:
    sessions = app.db.collection("sessions")
    sessions.document("old").set({"expires_at": clock.now() - 1})
    sessions.document("later").set({"expires_at": to_datetime(clock.now() + HOUR)})
    app.ttl("sessions", field="expires_at")  # indexes the documents already there
    assert ttl.sweep(app.runtime) == 1
    assert not exists(app, "sessions/old")
    clock.advance(HOUR)
    assert ttl.sweep(app.runtime) == 1
    assert not exists(app, "sessions/later")


def test_a_policy_declared_before_the_store_opens_is_indexed_when_it_opens(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    writer = make_app()
    writer.db.document("sessions/s1").set({"expires_at": clock.now() - 1})
    app = make_app()
    app.ttl("sessions", field="expires_at")  # the store is not open yet
    assert ttl.sweep(app.runtime) == 1
    assert not exists(app, "sessions/s1")


def test_a_sweep_with_nothing_due_reads_no_document(
    app: App, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    app.ttl("sessions", field="expires_at")
    for n in range(50):
        app.db.document(f"sessions/s{n}").set({"expires_at": clock.now() + n + 1})
    probes: list[list[str]] = []
    expired_paths = type(app.store).expired_paths

    def counted(self: Any, *args: Any) -> list[str]:
        probes.append(expired_paths(self, *args))
        return probes[-1]

    def no_read(*args: Any) -> None:
        raise AssertionError("a sweep with nothing due reads no document")

    monkeypatch.setattr(type(app.store), "expired_paths", counted)
    for tx_class in (SqlTx, *SqlTx.__subclasses__()):  # SqliteTx, PostgresTx
        for read in ("get_document", "list_documents", "documents_page", "index_page"):
            monkeypatch.setattr(tx_class, read, no_read)
    assert ttl.sweep(app.runtime) == 0
    assert probes == [[]], "one probe of the expiry index per policy"
    monkeypatch.undo()
    clock.advance(10)
    assert ttl.sweep(app.runtime) == 10
