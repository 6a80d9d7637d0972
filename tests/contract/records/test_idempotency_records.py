"""The store's @idempotent record operations: claim, takeover, complete, release, and what
they cost in statements."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from typing import Any

import pytest

from oncefire import App, idempotent
from oncefire.errors import StoreUnavailableError
from oncefire.events import Event
from oncefire.idempotency import IdempotencySpec, _acquire, _finish, _release
from oncefire.stores import queries
from oncefire.stores.base import Completed, IdempotencyCompletion, IdempotencyRecord, Store
from oncefire.stores.sqlite.store import SqliteStore
from oncefire.testing import TestClock, deliver
from tests.contract.records.idempotency_support import (
    LEASE,
    POLICY,
    T0,
    message_event,
    order_event,
    record_of,
)

SQL_POSTGRES = queries.load("postgres")

# -- the store's @idempotent operations -------------------------------------------------


def in_progress(token: str, now: float = T0, digest: str = "h1") -> IdempotencyRecord:
    """An in-progress record of key charge/k claimed at now under a LEASE-second lease."""
    return IdempotencyRecord(
        "charge/k", "charge", "in_progress", token, digest, now + LEASE, now + 100.0, None
    )


def complete(
    store: Store, key: str, token: str, now: float, expires_at: float, result_json: str | None
) -> bool:
    """Complete one record, if token still holds it."""
    done = IdempotencyCompletion(key, token, now, expires_at, result_json)
    return store.complete_idempotency_many([done]) == {key}


def test_store_claim_is_refused_while_a_record_lives_and_replaces_an_expired_one(
    app: App,
) -> None:
    store = app.store
    assert store.acquire_idempotency(in_progress("t1"), T0)
    assert not store.acquire_idempotency(in_progress("t2", digest="h2"), T0 + LEASE)
    assert store.idempotency_record("charge/k") == in_progress("t1")
    assert complete(store, "charge/k", "t1", T0 + 1, T0 + 50, '"r"')
    assert not store.acquire_idempotency(in_progress("t3", T0 + 49), T0 + 49)
    # At its expiry a record is free, whatever its status or payload.
    assert store.acquire_idempotency(in_progress("t4", T0 + 51, "h2"), T0 + 51)
    assert store.idempotency_record("charge/k") == in_progress("t4", T0 + 51, "h2")


def test_store_takeover_needs_the_stale_token_an_in_progress_record_and_a_run_out_lease(
    app: App,
) -> None:
    store = app.store
    store.acquire_idempotency(in_progress("t1"), T0)
    assert not store.take_over_idempotency(in_progress("t2", T0 + 10), "t1", T0 + 10)
    assert not store.take_over_idempotency(in_progress("t2", T0 + LEASE), "t0", T0 + LEASE)
    assert store.take_over_idempotency(in_progress("t2", T0 + LEASE), "t1", T0 + LEASE)
    assert store.idempotency_record("charge/k") == in_progress("t2", T0 + LEASE)
    # A second takeover that read the same stale record finds it taken: one winner.
    assert not store.take_over_idempotency(in_progress("t3", T0 + LEASE), "t1", T0 + LEASE)
    # A completed record is never taken over, even with its own token and after its lease.
    assert complete(store, "charge/k", "t2", T0 + LEASE, T0 + 100, '"r"')
    assert not store.take_over_idempotency(in_progress("t4", T0 + 99), "t2", T0 + 99)
    assert store.idempotency_record("charge/k") == IdempotencyRecord(
        "charge/k", "charge", "completed", "t2", "h1", T0 + LEASE, T0 + 100, '"r"'
    )


def test_store_complete_and_release_change_only_the_record_their_token_holds(app: App) -> None:
    store = app.store
    store.acquire_idempotency(in_progress("t1"), T0)
    assert not complete(store, "charge/k", "t0", T0 + 1, T0 + 50, '"stale"')
    assert not store.release_idempotency("charge/k", "t0")
    assert not complete(store, "charge/other", "t1", T0 + 1, T0 + 50, '"r"')
    assert store.idempotency_record("charge/k") == in_progress("t1")
    assert store.release_idempotency("charge/k", "t1")
    assert store.idempotency_record("charge/k") is None
    assert not store.release_idempotency("charge/k", "t1")
    store.acquire_idempotency(in_progress("t2"), T0)
    assert complete(store, "charge/k", "t2", T0 + 1, T0 + 50, None)
    assert not store.release_idempotency("charge/k", "t2"), "a completed record stays"
    assert store.idempotency_record("charge/k") == IdempotencyRecord(
        "charge/k", "charge", "completed", "t2", "h1", T0 + 1, T0 + 50, None
    )


def test_sqlite_single_statement_writes_wait_for_a_busy_writer(sqlite_url: str) -> None:
    app = App(sqlite_url, clock=TestClock())
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), check_same_thread=False)
    other.isolation_level = None
    app.store.idempotency_record("charge/k")  # this thread's connection is open
    other.execute("BEGIN IMMEDIATE")
    # Held well past SQLite's own busy wait (20 ms) on the store's connections.
    commit = threading.Timer(0.2, other.execute, ("COMMIT",))
    commit.start()
    try:
        assert app.store.acquire_idempotency(in_progress("t1"), T0)
        assert app.store.idempotency_record("charge/k") == in_progress("t1")
    finally:
        commit.join()
        app.close()
        other.close()


@contextmanager
def statements_of_this_thread(app: App) -> Iterator[list[str]]:
    """The SQL statements the store runs for the calling thread inside the block."""
    seen: list[str] = []
    if isinstance(app.store, SqliteStore):
        # Both of the thread's connections: the usual one and the one that does not flush.
        with ExitStack() as stack:
            for flushed in (True, False):
                conn = stack.enter_context(app.store.connections.connection(flushed=flushed))
                conn.set_trace_callback(seen.append)
                stack.callback(conn.set_trace_callback, None)
            yield seen
        return
    import psycopg

    execute = psycopg.Cursor.execute
    me = threading.get_ident()

    def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == me:
            seen.append(str(query))
        return execute(cursor, query, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted)
        yield seen


def verb(sql: str) -> str:
    """What a statement does, after its WITH clauses."""
    return next(w for w in sql.split() if w in ("INSERT", "UPDATE", "DELETE", "SELECT"))


def test_a_new_key_costs_one_statement_to_claim_and_one_to_complete(app: App) -> None:
    spec = IdempotencySpec(LEASE, 3600.0, lambda e: e.id, "charge")
    event = message_event("e1", amount=500)
    app.store.idempotency_record("charge/warm-up")  # the connection is open before counting
    with statements_of_this_thread(app) as claiming:
        claim = _acquire(app.runtime, spec, event)
    with statements_of_this_thread(app) as completing:
        _finish(app.runtime, spec, claim, "ok")
    assert [verb(s) for s in claiming] == ["INSERT"]
    assert [verb(s) for s in completing] == ["UPDATE"]
    second = _acquire(app.runtime, spec, event)
    assert second.is_done and second.result == "ok"
    with statements_of_this_thread(app) as releasing:
        _release(app.runtime, _acquire(app.runtime, spec, message_event("e2", amount=500)))
    assert [verb(s) for s in releasing] == ["INSERT", "DELETE"]


def synchronous_of_statements(store: SqliteStore, run: Any) -> dict[str, int]:
    """The `PRAGMA synchronous` (2 FULL, 1 NORMAL) of the connection each statement `run()`
    makes on this thread ran on, by the statement's first word."""
    seen: dict[str, int] = {}

    def tracer(level: int) -> Callable[[str], None]:
        def trace(sql: str) -> None:
            seen.setdefault(sql.split()[0], level)

        return trace

    with ExitStack() as stack:
        for flushed in (True, False):
            conn = stack.enter_context(store.connections.connection(flushed=flushed))
            conn.set_trace_callback(tracer(conn.execute("PRAGMA synchronous").fetchone()[0]))
            stack.callback(conn.set_trace_callback, None)
        run()
    return seen


def test_sqlite_commits_an_in_progress_record_without_waiting_for_the_disk(
    sqlite_url: str,
) -> None:
    # An in-progress record lost in a power cut changes no outcome; a completion does.
    app = App(sqlite_url, clock=TestClock())
    store = app.store
    assert isinstance(store, SqliteStore)
    try:
        acquired = synchronous_of_statements(
            store, lambda: store.acquire_idempotency(in_progress("t1"), T0)
        )
        taken = synchronous_of_statements(
            store, lambda: store.take_over_idempotency(in_progress("t2"), "t1", T0 + LEASE)
        )
        done = IdempotencyCompletion("charge/k", "t2", T0 + 1, T0 + 50, None)
        completed = synchronous_of_statements(
            store, lambda: store.complete_idempotency_many([done])
        )
        assert acquired == {"INSERT": 1} and taken == {"UPDATE": 1}
        assert completed == {"UPDATE": 2}
        assert store.idempotency_record("charge/k") == IdempotencyRecord(
            "charge/k", "charge", "completed", "t2", "h1", T0 + 1, T0 + 50, None
        )
    finally:
        app.close()


def test_sqlite_acquire_inside_an_open_transaction_joins_it(sqlite_url: str) -> None:
    # A second connection would wait for the lock this thread holds, then fail.
    app = App(sqlite_url, clock=TestClock())
    store = app.store
    assert isinstance(store, SqliteStore)
    try:
        with pytest.raises(RuntimeError, match="undone"), store.batch():
            assert store.acquire_idempotency(in_progress("t1"), T0)
            raise RuntimeError("undone")
        assert store.idempotency_record("charge/k") is None
        with store.connections.transaction():
            assert store.acquire_idempotency(in_progress("t1"), T0)
        assert store.idempotency_record("charge/k") == in_progress("t1")
    finally:
        app.close()


def test_postgres_commits_an_in_progress_record_without_waiting_for_the_flush_but_not_a_batch(
    postgres_store_url: str,
) -> None:
    # synchronous_commit is off for the acquire's own transaction only: never for a batch it
    # joins (a worker's turn), nor for the next statement of its pooled connection.
    from oncefire.stores.postgres.store import PostgresStore

    app = App(postgres_store_url, clock=TestClock())
    store = app.store
    assert isinstance(store, PostgresStore)
    sent: list[dict[str, Any]] = []
    run = store.pool.run

    def recorded(query: str, args: Any = ()) -> list[Any]:
        if "oncefire_idempotency" in query:
            sent.append(dict(args))
        return run(query, args)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store.pool, "run", recorded)
            assert store.acquire_idempotency(in_progress("t1"), T0)
            assert store.take_over_idempotency(in_progress("t2"), "t1", T0 + LEASE)
            with store.batch():
                assert store.acquire_idempotency(in_progress("t3", T0 + 200, "h3"), T0 + 200)
                assert store.pool.run("SHOW synchronous_commit") == [("on",)]
        assert [a["unflushed"] for a in sent] == [True, True, False]
        with store.pool.transaction() as conn:  # the acquire's setting, in a transaction
            conn.execute(
                SQL_POSTGRES["insert_record"],
                {**asdict(in_progress("t9")), "key": "charge/other", "now": T0, "unflushed": True},
            )
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
        assert store.pool.run("SHOW synchronous_commit") == [("on",)]
        assert store.idempotency_record("charge/k") == in_progress("t3", T0 + 200, "h3")
    finally:
        app.close()


def test_a_completion_cut_off_by_a_postgres_restart_lands_after_the_reconnect(
    postgres_store_url: str, clock: TestClock
) -> None:
    # Issue 11, point 26: the record stayed in progress, so the retry ran the effect again.
    import psycopg

    app = App(postgres_store_url, clock=clock)
    effects: list[str] = []

    @idempotent(lease=LEASE)
    def charge_once(event: Event) -> str:
        effects.append(event.id)
        with psycopg.connect(postgres_store_url, autocommit=True) as admin:
            # What a server restart does to the store's connections: every one is cut (and
            # gone before the function returns).
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        return "ch_1"

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def charge(event: Event) -> None:
        charge_once(event)

    try:
        event = order_event()
        assert deliver(app, "charge", event, times=1)["succeeded"] == 1
        record = record_of(app, event.id)
        assert record is not None and record.status == "completed"
        assert deliver(app, "charge", event, times=2)["succeeded"] == 2
        assert effects == [event.id]
    finally:
        app.close()


@pytest.mark.slow
def test_a_holder_cut_off_from_the_store_past_its_lease_is_not_repeated_by_another_worker(
    app: App, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    effects: list[str] = []
    event = order_event()

    @idempotent(lease=LEASE)
    def charge_once(event: Event) -> str:
        effects.append(event.id)
        return "ch_1"

    @app.on_document_created("orders/{orderId}", retry_policy=POLICY, timeout=LEASE)
    def charge(event: Event) -> None:
        charge_once(event)

    complete = app.store.complete_many  # a success's completion is written with its ending
    is_cut_off = True

    def cut_off_once(*args: Any) -> Completed:
        nonlocal is_cut_off
        if is_cut_off:
            is_cut_off = False
            # The effect happened; this worker cannot reach the store for longer than the
            # record's lease, while another worker, back sooner, runs the event again.
            clock.advance(LEASE + 1)
            deliver(app, "charge", event, times=1)
            raise StoreUnavailableError("The PostgreSQL store is unavailable: a restart.")
        return complete(*args)

    monkeypatch.setattr(app.store, "complete_many", cut_off_once)
    assert deliver(app, "charge", event, times=1)["succeeded"] == 1
    assert not is_cut_off, "the completion was never written"
    assert effects == [event.id], "the other worker took the key over and ran the effect again"
