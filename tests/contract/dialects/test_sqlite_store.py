"""Behaviour only the SQLite store has: WAL, synchronous, busy timeout, BEGIN IMMEDIATE,
numbered migrations, several connections, and the field index used by equality queries."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from oncefire import App, SchemaVersionError, StoreError
from oncefire.model import codec
from oncefire.stores import migrations
from oncefire.stores.sqlite import connections as sqlite_connections
from oncefire.stores.sqlite.store import SqliteStore
from oncefire.testing import TestClock


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "oncefire.db"


@pytest.fixture
def app(db_path: Path) -> Iterator[App]:
    app = App(f"sqlite:///{db_path}", clock=TestClock())
    yield app
    app.close()


@contextmanager
def raw(db_path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection of our own, closed on exit."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def store_connection(app: App) -> sqlite3.Connection:
    """The connection the store uses in this thread."""
    store = app.store
    assert isinstance(store, SqliteStore)
    with store.connections.connection() as conn:
        return conn


def test_the_file_is_in_wal_mode(app: App, db_path: Path) -> None:
    app.db.document("docs/a").set({"n": 1})
    with raw(db_path) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert Path(f"{db_path}-wal").exists()


def test_synchronous_is_full_by_default(app: App) -> None:
    assert store_connection(app).execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_synchronous_normal_is_an_opt_in(db_path: Path) -> None:
    app = App(f"sqlite:///{db_path}", sqlite_synchronous="NORMAL")
    try:
        assert store_connection(app).execute("PRAGMA synchronous").fetchone()[0] == 1
    finally:
        app.close()


def test_a_write_waits_for_another_writer_instead_of_failing(app: App, db_path: Path) -> None:
    # Another process holds the write lock for a moment: the write waits its turn (the store's
    # busy loop and SQLite's handler), it does not fail with "database is locked".
    app.db.document("orders/o0").set({"n": 0})  # the schema exists before the lock is taken
    other = sqlite3.connect(db_path, timeout=0, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    holder = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    holder.start()
    try:
        app.db.document("orders/o1").set({"n": 1})
    finally:
        holder.join()
        other.close()
    assert app.db.document("orders/o1").get().to_dict() == {"n": 1}


def test_write_transactions_begin_immediate(app: App, db_path: Path) -> None:
    other = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        # No write yet, but the write lock is already held: BEGIN IMMEDIATE.
        with app.db.transaction(), pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()


def test_a_second_connection_sees_commits(app: App, db_path: Path) -> None:
    app.db.document("docs/a").set({"n": 1})
    with raw(db_path) as other:
        row = other.execute("SELECT data FROM oncefire_documents WHERE path = 'docs/a'")
        assert codec.loads(row.fetchone()[0]) == {"n": 1}
    second = App(f"sqlite:///{db_path}")
    try:
        assert second.db.document("docs/a").get().to_dict() == {"n": 1}
        second.db.document("docs/b").set({"n": 2})
        assert app.db.document("docs/b").get().to_dict() == {"n": 2}
    finally:
        second.close()


def test_the_schema_is_created_by_numbered_migrations(app: App, db_path: Path) -> None:
    _ = app.store
    latest = migrations.latest("sqlite")
    with raw(db_path) as other:
        versions = [r[0] for r in other.execute("SELECT version FROM oncefire_schema")]
        tables = {
            r[0] for r in other.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    assert versions == [v for v, _ in migrations.load("sqlite")]
    assert versions[-1] == latest
    assert {"oncefire_documents", "oncefire_events", "oncefire_deliveries"} <= tables
    assert all(name.startswith(("oncefire_", "sqlite_")) for name in tables)


def test_migrating_again_changes_nothing(app: App, db_path: Path) -> None:
    app.db.document("docs/a").set({"n": 1})
    assert app.store.migrate() == migrations.latest("sqlite")
    again = App(f"sqlite:///{db_path}")
    try:
        assert again.db.document("docs/a").get().to_dict() == {"n": 1}
    finally:
        again.close()
    with raw(db_path) as other:
        assert other.execute("SELECT count(*) FROM oncefire_schema").fetchone()[0] == len(
            migrations.load("sqlite")
        )


def test_a_schema_newer_than_this_oncefire_is_refused(app: App, db_path: Path) -> None:
    _ = app.store
    app.close()
    with raw(db_path) as other:
        other.execute("INSERT INTO oncefire_schema (version) VALUES (999)")
    newer = App(f"sqlite:///{db_path}")
    with pytest.raises(SchemaVersionError, match=r"999.*upgrade oncefire"):
        _ = newer.store
    newer.close()


def test_a_file_that_cannot_be_opened_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="Cannot open"):
        _ = App(f"sqlite:///{tmp_path}/missing-dir/x.db").store


def test_a_bad_sqlite_url_is_refused() -> None:
    with pytest.raises(Exception, match="sqlite:///relative"):
        SqliteStore("sqlite:/nope.db")


def test_an_in_memory_store_works_for_scripts() -> None:
    app = App("sqlite://:memory:", clock=TestClock())
    try:
        seen: list[str] = []
        app.on_document_created("orders/{o}")(lambda event: seen.append(event.source))
        app.db.document("orders/o1").set({"n": 1})
        app.drain()
        assert seen == ["orders/o1"]
    finally:
        app.close()


# -- the declared field index ----------------------------------------------------------


def equality_plan(app: App, field: str, value: str) -> str:
    """EXPLAIN QUERY PLAN of the statement an equality query on an indexed field runs."""
    statements: list[str] = []
    conn = store_connection(app)
    conn.set_trace_callback(statements.append)
    try:
        app.db.collection("orders").where(field, "==", value).get()
    finally:
        conn.set_trace_callback(None)
    [query] = [s for s in statements if "oncefire_index_entries" in s]
    rows = conn.execute(f"EXPLAIN QUERY PLAN {query}").fetchall()
    return "\n".join(str(r[-1]) for r in rows)


def test_an_equality_on_an_indexed_field_uses_the_index(app: App) -> None:
    orders = app.db.collection("orders")
    orders.index("status")
    with app.db.transaction() as tx:
        for n in range(300):
            tx.set(orders.document(f"o{n:03}"), {"status": "paid" if n % 100 == 0 else "new"})
    plan = equality_plan(app, "status", "paid")
    assert "SCAN" not in plan, plan
    # The index entries, walked from the value's first key to its last (a page at a time).
    assert "(collection=? AND field=? AND (value,path)>(?,?) AND value<?)" in plan, plan
    assert "(collection=? AND path=?)" in plan, plan  # then each matching document by its key


def test_an_equality_on_an_indexed_field_decodes_only_the_matches(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    orders = app.db.collection("orders")
    orders.index("status")
    with app.db.transaction() as tx:
        for n in range(2000):
            tx.set(orders.document(f"o{n:04}"), {"status": "paid" if n % 500 == 0 else "new"})
    decoded = 0
    real_loads = codec.loads

    def counting_loads(text: str | bytes) -> object:
        nonlocal decoded
        decoded += 1
        return real_loads(text)

    monkeypatch.setattr(codec, "loads", counting_loads)
    paid = orders.where("status", "==", "paid").get()
    assert [s.id for s in paid] == ["o0000", "o0500", "o1000", "o1500"]
    assert decoded == 4
    decoded = 0
    assert len(orders.where("other", "==", "x").get()) == 0  # not indexed: a scan
    assert decoded == 2000


def test_an_index_declared_after_the_writes_covers_existing_documents(app: App) -> None:
    orders = app.db.collection("orders")
    for n in range(5):
        orders.document(f"o{n}").set({"status": "paid" if n % 2 else "new"})
    orders.index("status")
    with raw(Path(app.settings.store.removeprefix("sqlite:///"))) as other:
        count = other.execute(
            "SELECT count(*) FROM oncefire_index_entries WHERE field = 'status'"
        ).fetchone()[0]
    assert count == 5
    assert [s.id for s in orders.where("status", "==", "paid").get()] == ["o1", "o3"]


def test_a_writer_waits_for_a_lock_within_the_busy_timeout(app: App, db_path: Path) -> None:
    _ = app.store
    other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        releasing = threading.Event()

        def release() -> None:
            releasing.set()  # before the lock goes, so the writer cannot commit first
            other.execute("ROLLBACK")

        timer = threading.Timer(0.3, release)
        timer.start()
        app.db.document("docs/a").set({"n": 1})  # waits for the other writer, then commits
        assert releasing.is_set(), "the write committed while the other writer held the lock"
        timer.join()
        assert app.db.document("docs/a").get().exists
    finally:
        other.close()


def test_a_lock_held_past_the_busy_timeout_is_a_store_error(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_connections, "BUSY_TIMEOUT_MS", 100)
    app = App(f"sqlite:///{db_path}")
    other = sqlite3.connect(db_path, isolation_level=None)
    try:
        _ = app.store
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match="locked"):
            app.db.document("docs/a").set({"n": 1})
        other.execute("ROLLBACK")
        app.db.document("docs/a").set({"n": 1})
    finally:
        other.close()
        app.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc")
def test_repeated_drains_do_not_leak_connections(app: App) -> None:
    app.on_document_created("orders/{o}")(lambda event: None)

    def write_and_drain(n: int) -> None:
        app.db.document(f"orders/o{n}").set({"n": n})
        assert app.drain()["succeeded"] == 1

    write_and_drain(0)
    before = len(os.listdir("/proc/self/fd"))
    for n in range(1, 40):
        write_and_drain(n)
    assert len(os.listdir("/proc/self/fd")) - before < 10


def test_a_driver_error_outside_a_transaction_is_a_store_error(sqlite_url: str) -> None:
    app = App(sqlite_url)
    with app.store.transaction() as tx:
        tx.conn.execute("DROP TABLE oncefire_events")  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match="no such table"):
        app.dead_letters.list()
    app.close()


def test_a_store_that_cannot_migrate_keeps_no_file_open(sqlite_url: str) -> None:
    path = sqlite_url.removeprefix("sqlite:///")
    SqliteStore(sqlite_url).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO oncefire_schema (version) VALUES (999)")
    conn.commit()
    conn.close()

    def open_files() -> set[str]:
        return {
            os.path.realpath(entry.path)
            for entry in os.scandir("/proc/self/fd")
            if os.path.exists(entry.path)
        }

    with pytest.raises(SchemaVersionError):
        SqliteStore(sqlite_url)
    assert not {f for f in open_files() if f.startswith(path)}


def test_leasing_walks_the_due_index_instead_of_sorting_the_backlog(sqlite_url: str) -> None:
    app = App(sqlite_url, clock=TestClock())

    @app.on_document_created("orders/{o}")
    def charge(event: object) -> None: ...

    with app.db.transaction() as tx:
        for n in range(50):
            tx.set(app.db.document(f"orders/o{n}"), {"n": n})
    statements: list[str] = []
    conn = store_connection(app)
    conn.set_trace_callback(statements.append)
    try:
        now = app.clock.now()
        app.store.lease_due(
            worker="w", now=now, lease_until=now + 30, limit=5, functions=["charge"], caps={}
        )
    finally:
        conn.set_trace_callback(None)
    [query] = [s for s in statements if s.startswith("SELECT run_at")]
    plan = " ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {query}").fetchall())
    assert "oncefire_deliveries_due" in plan
    assert "TEMP B-TREE" not in plan
    app.close()


def test_an_error_after_sqlite_rolled_back_itself_is_the_one_raised(sqlite_url: str) -> None:
    # SQLite ends the transaction itself on some errors (SQLITE_FULL, IOERR); a ROLLBACK then
    # fails with "no transaction is active", which must not hide the first error.
    app = App(sqlite_url)
    try:
        with (
            pytest.raises(ValueError, match="the first error"),
            app.store.transaction() as tx,
        ):
            tx.conn.execute("ROLLBACK")  # type: ignore[attr-defined]
            raise ValueError("the first error")
        app.db.document("docs/a").set({"n": 1})  # the connection is usable again
    finally:
        app.close()


def test_a_full_database_reports_that_it_is_full(sqlite_url: str) -> None:
    app = App(sqlite_url)
    try:
        conn = store_connection(app)
        conn.execute("PRAGMA max_page_count = 60")
        with pytest.raises(StoreError, match="full"):
            for n in range(200):
                app.db.document(f"docs/{n}").set({"blob": "x" * 4000})
    finally:
        app.close()


@pytest.mark.parametrize(
    ("lease", "renew_every"),
    [(30.0, 10.0), (20.0, 10.0), (12.0, 4.0)],
    ids=["default", "lease 20 renewed every 10", "lease 12 renewed every 4"],
)
def test_the_busy_wait_leaves_a_worker_time_to_renew_its_leases(
    db_path: Path, lease: float, renew_every: float
) -> None:
    # A worker waiting for the write lock cannot renew: the wait must end before a lease
    # renewed on time could run out, for the app's own lease and renewal interval.
    app = App(f"sqlite:///{db_path}", lease=lease, renew_every=renew_every)
    try:
        store = app.store
        assert isinstance(store, SqliteStore)
        settings = app.settings
        assert store.connections.busy_wait < settings.lease - settings.renew_every
    finally:
        app.close()


def test_a_writer_gives_up_on_the_lock_in_time_to_renew_a_short_lease(db_path: Path) -> None:
    # With a 0.5 s lease renewed every 0.1 s, a write gives up on a held lock after 0.2 s, not
    # after the 15 s a default app waits.
    app = App(f"sqlite:///{db_path}", lease=0.5, renew_every=0.1)
    other = sqlite3.connect(db_path, isolation_level=None)
    try:
        _ = app.store
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match=r"stayed locked for 0\.2 s"):
            app.db.document("docs/a").set({"n": 1})
    finally:
        other.close()
        app.close()
