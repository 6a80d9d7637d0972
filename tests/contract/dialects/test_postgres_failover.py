"""Issue 48 point 1: a PostgreSQL store on a URL of several hosts (libpq's syntax) writes to
the primary whatever the order of the hosts, and follows a promotion by itself: the pool, the
LISTEN connection and the CLI find the new primary without being reopened. A connection that
reaches a standby is never used for writes; a call fails with StoreUnavailableError only when
no primary answered within the retry window. On private clusters (tests/pg_cluster.py): a
primary and a streaming standby made with `pg_basebackup -R`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from oncefire import App
from oncefire.cli import main
from oncefire.errors import StoreUnavailableError
from oncefire.events import Event
from oncefire.stores.postgres import hosts as postgres_hosts
from oncefire.stores.postgres import pool as postgres_pool
from tests.pg_cluster import Cluster, replicated

pytestmark = pytest.mark.postgres

DATABASE = "failover"


@pytest.fixture
def pair() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary with a synchronous standby, and the test's database on both."""
    with replicated(is_synchronous=True) as (primary, standby):
        primary.create_database(DATABASE)
        standby.caught_up(primary)
        yield primary, standby


def hosts(*clusters: Cluster) -> str:
    """A URL of several hosts, in the order given, without target_session_attrs."""
    listed = ",".join(f"127.0.0.1:{c.port}" for c in clusters)
    return f"postgresql://postgres@{listed}/{DATABASE}"


def sessions(cluster: Cluster) -> int:
    """oncefire's sessions on a server (its pool and its listener)."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'oncefire%'"
    return int(str(cluster.admin(sql)[0][0]))


def documents(cluster: Cluster) -> list[Any]:
    """The paths of the documents on a server, read there directly."""
    import psycopg

    with psycopg.connect(cluster.database_url(DATABASE), autocommit=True) as conn:
        rows = conn.execute("SELECT path FROM oncefire_documents ORDER BY path").fetchall()
    return [row[0] for row in rows]


def test_a_url_whose_first_host_is_a_standby_writes_to_the_primary(
    pair: tuple[Cluster, Cluster],
) -> None:
    primary, standby = pair
    app = App(hosts(standby, primary))
    ran: list[str] = []

    @app.on_document_created("orders/{id}")
    def charge(event: Event) -> None:
        with app.db.transaction() as tx:
            if tx.claim(event.id):
                tx.set(app.db.document(f"charges/{event.params['id']}"), {"ok": True})
        ran.append(event.params["id"])

    try:
        app.db.document("orders/o1").set({"amount": 5})
        app.publish("topic", {"n": 1})
        assert app.drain().outcomes == {"succeeded": 1}
        app.store.wait(0.01)  # opens the LISTEN connection too
        assert ran == ["o1"]
        assert documents(primary) == ["charges/o1", "orders/o1"]
        assert sessions(standby) == 0 and sessions(primary) >= 2
    finally:
        app.close()


def test_the_store_follows_a_promotion_without_being_reopened(
    pair: tuple[Cluster, Cluster],
) -> None:
    primary, standby = pair
    app = App(hosts(primary, standby))
    try:
        app.db.document("orders/before").set({"n": 1})  # acknowledged: the standby has it
        app.store.wait(0.01)
        primary.stop("immediate")
        standby.promote()
        app.db.document("orders/after").set({"n": 2})  # no error, no reopening
        app.store.wait(0.01)  # the LISTEN connection too reaches the new primary
        assert documents(standby) == ["orders/after", "orders/before"]
        assert sessions(standby) >= 2
    finally:
        app.close()


def test_only_a_standby_left_is_an_unavailable_store_after_the_retry_window(
    pair: tuple[Cluster, Cluster],
) -> None:
    primary, standby = pair
    app = App(hosts(primary, standby), store_retry_window=1.0)
    try:
        app.db.document("orders/before").set({"n": 1})
        primary.stop("immediate")
        with pytest.raises(StoreUnavailableError) as caught:
            app.db.document("orders/refused").set({"n": 2})
        assert "\n" not in str(caught.value)
        assert sessions(standby) == 0  # never kept a connection to the standby
        standby.promote()
        # The same App writes again once its pool's next connection attempt comes (its
        # backoff is bounded by the window): a write may still fail until then.
        deadline = time.monotonic() + 30
        while not written(app, "orders/after"):
            assert time.monotonic() < deadline, "no write succeeded after the promotion"
        assert documents(standby) == ["orders/after", "orders/before"]
    finally:
        app.close()


def test_a_write_that_reaches_a_standby_waits_for_its_promotion(
    pair: tuple[Cluster, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL names the standby alone (no target_session_attrs): its connections are never
    used for writes; the write waits, within the window, until the server takes writes."""
    primary, standby = pair
    App(primary.database_url(DATABASE)).close()  # the schema, on both
    standby.caught_up(primary)
    primary.stop("immediate")
    met_standby = threading.Event()

    def is_standby(conn: Any) -> bool:
        found = postgres_hosts.is_standby(conn)
        if found:
            met_standby.set()
        return found

    monkeypatch.setattr(postgres_pool, "is_standby", is_standby)
    app = App(standby.database_url(DATABASE), store_retry_window=60.0)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            app.db.document("orders/o1").set({"n": 1})
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert met_standby.wait(30)
        standby.promote()
        writer.join(60)
        assert not writer.is_alive() and errors == []
        assert documents(standby) == ["orders/o1"]
    finally:
        writer.join(60)
        app.close()


def test_a_standby_alone_is_read_only_after_the_retry_window(
    pair: tuple[Cluster, Cluster],
) -> None:
    primary, standby = pair
    writer = App(primary.database_url(DATABASE))
    writer.db.document("orders/o1").set({"n": 1})
    writer.close()
    standby.caught_up(primary)
    app = App(standby.database_url(DATABASE), store_retry_window=0.5)
    try:
        with pytest.raises(StoreUnavailableError, match="read-only") as caught:
            app.db.document("orders/o2").set({"n": 2})
        assert "\n" not in str(caught.value)
    finally:
        app.close()


def written(app: App, path: str) -> bool:
    """Whether a write of path succeeded (False: the store was unavailable)."""
    try:
        app.db.document(path).set({"n": 3})
    except StoreUnavailableError:
        return False
    return True


def test_the_command_line_takes_a_url_of_several_hosts(pair: tuple[Cluster, Cluster]) -> None:
    primary, standby = pair
    url = hosts(standby, primary)
    runner = CliRunner()
    migrated = runner.invoke(main, ["migrate", "--store", url])
    assert migrated.exit_code == 0 and "schema at version" in migrated.stdout, migrated.output
    written = runner.invoke(main, ["doc", "set", "orders/o1", '{"a": 1}', "--store", url])
    assert written.exit_code == 0, written.output
    assert f"store: {url}" in written.stderr
    read = runner.invoke(main, ["doc", "get", "orders/o1", "--store", url])
    assert read.exit_code == 0 and '"a": 1' in read.stdout, read.output
    assert documents(primary) == ["orders/o1"]
