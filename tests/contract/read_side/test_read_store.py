"""Issue 48 point 5: a read replica for the dashboard and stats (`read_store`,
$ONCEFIRE_READ_STORE). With a streaming standby held behind its primary, the dashboard, stats,
history and dead-letter listings show the standby's (older) figures, and none of their
connections goes to the primary; acting on a dead letter the standby has not received yet
reads and writes the primary, and works. On private clusters (tests/pg_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from starlette.testclient import TestClient

from oncefire import App
from oncefire.errors import StoreError
from oncefire.events import Event
from oncefire.web.dashboard.server import create_app
from tests.pg_cluster import Cluster, replicated

pytestmark = pytest.mark.postgres

DATABASE = "replicated"


@pytest.fixture
def pair() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary with an asynchronous standby (held back, its commits still go on)."""
    with replicated(is_synchronous=False) as (primary, standby):
        primary.create_database(DATABASE)
        standby.caught_up(primary)
        yield primary, standby


def reading_sessions(cluster: Cluster) -> int:
    """The read store's sessions on a server."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'oncefire-reads'"
    return int(str(cluster.admin(sql)[0][0]))


def newest_dead_letter(cluster: Cluster) -> int:
    """The id of the newest dead letter, read on that server."""
    with psycopg.connect(cluster.database_url(DATABASE), autocommit=True) as conn:
        row = conn.execute("SELECT max(id) FROM oncefire_deliveries WHERE state = 'dead'")
        return int(str(row.fetchall()[0][0]))


def test_the_dashboard_and_stats_read_the_replica_and_actions_the_primary(
    pair: tuple[Cluster, Cluster],
) -> None:
    primary, standby = pair
    app = App(primary.database_url(DATABASE), read_store=standby.database_url(DATABASE))

    @app.on_message("bad", name="bad", retry=False)
    def bad(event: Event) -> None:
        raise ValueError("refused")

    @app.on_message("good", name="good")
    def good(event: Event) -> None:
        pass

    dashboard = TestClient(create_app(app, allowed_hosts=["testserver"]))
    try:
        app.publish("bad", {})
        app.publish("good", {})
        app.drain()
        standby.caught_up(primary)
        assert app.stats()["good"].succeeded == 1
        assert app.dead_letters.count("bad") == 1

        primary.hold_replication(True)  # the standby stays where it is
        app.publish("bad", {})
        app.publish("good", {})
        app.drain()
        # What the dashboard, stats, history and listings read is the standby's.
        assert app.stats()["good"].succeeded == 1
        assert app.dead_letters.count("bad") == 1 and len(app.dead_letters.list()) == 1
        assert app.history.backlog() == {}
        counted = dashboard.get("/api/functions/bad/dead-letters/count")
        assert counted.status_code == 200 and counted.json()["count"] == 1
        assert "oncefire_dead_letters" in dashboard.get("/metrics").text
        # Acting on a dead letter only the primary has reads and writes the primary.
        app.dead_letters.replay(newest_dead_letter(primary))
        assert reading_sessions(standby) >= 1 and reading_sessions(primary) == 0

        primary.hold_replication(False)
        standby.caught_up(primary)
        assert app.stats()["good"].succeeded == 2
    finally:
        primary.hold_replication(False)
        dashboard.close()
        app.close()


def test_a_read_store_without_an_oncefire_store_is_refused(
    pair: tuple[Cluster, Cluster],
) -> None:
    primary, standby = pair
    app = App(primary.database_url(DATABASE), read_store=standby.database_url("postgres"))
    try:
        with pytest.raises(StoreError, match="read store holds no oncefire store"):
            app.stats()
    finally:
        app.close()
