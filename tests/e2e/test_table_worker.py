"""Issue 17 end to end: `oncefire worker` processes run row-triggered functions while another
process writes the application's table with SQLAlchemy; a worker SIGKILLed mid-run (with its
supervisor, as in a machine crash) loses nothing: the next worker runs what it held and what
was written meanwhile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.cli_support import ONCEFIRE, poll_until

pytestmark = pytest.mark.e2e

ROWS = 240
APP = """
import time
from pathlib import Path
from oncefire import App

app = App()

def note(line):
    with Path("ledger.txt").open("a") as out:
        out.write(line + "\\n")

@app.on_row_inserted("t_e2e_orders")
def placed(event):
    time.sleep(0.05)  # work under way when the worker is killed
    note(f"inserted {event.params['id']} {event.data.after['status']}")

@app.on_row_updated("t_e2e_orders", columns=["status"])
def paid(event):
    note(f"updated {event.params['id']} {event.data.before['status']}>{event.data.after['status']}")
"""
WRITER = """
import sys
import sqlalchemy as sa

url = sys.argv[1].replace("postgresql://", "postgresql+psycopg://", 1)
engine = sa.create_engine(url)
orders = sa.Table(
    "t_e2e_orders", sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("status", sa.Text), sa.Column("note", sa.Text),
)
if sys.argv[2] in ("setup", "teardown"):
    orders.metadata.drop_all(engine)
    if sys.argv[2] == "setup":
        orders.metadata.create_all(engine)
else:
    for i in range(1, int(sys.argv[3]) + 1):
        with engine.begin() as conn:
            conn.execute(orders.insert().values(id=i, status="new"))
        if i % 3 == 0:
            with engine.begin() as conn:
                conn.execute(orders.update().where(orders.c.id == i).values(status="paid"))
                conn.execute(orders.update().where(orders.c.id == i).values(note="unwatched"))
engine.dispose()
"""
DEADLINE = 90.0


def wait_for(what: str, check: Callable[[], object]) -> None:
    """Poll check() until it is truthy; fail after DEADLINE."""
    poll_until(what, check, DEADLINE)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shop.db"
    return str(request.getfixturevalue("postgres_store_url"))


@pytest.fixture
def start(tmp_path: Path, url: str) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start a command in tmp_path, in its own process group, on the store."""
    started: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env.update(
        ONCEFIRE_STORE=url,
        ONCEFIRE_SWEEP_EVERY="0.3",
        ONCEFIRE_LEASE="3",
        ONCEFIRE_RENEW_EVERY="1",
    )

    def run(*argv: str, log: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / log, "wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=tmp_path,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(proc)
        return proc

    yield run
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_a_killed_worker_loses_no_row_change(
    tmp_path: Path, url: str, start: Callable[..., subprocess.Popen[bytes]]
) -> None:
    (tmp_path / "shop.py").write_text(APP)
    (tmp_path / "writer.py").write_text(WRITER)
    assert start(sys.executable, "writer.py", url, "setup", log="setup.log").wait(60) == 0
    migrate = start(ONCEFIRE, "migrate", "shop.py", log="migrate.log")
    assert migrate.wait(60) == 0, (tmp_path / "migrate.log").read_text()
    assert "watching table t_e2e_orders" in (tmp_path / "migrate.log").read_text()

    first = start(ONCEFIRE, "worker", "shop.py", log="worker1.log")
    writer = start(sys.executable, "writer.py", url, "write", str(ROWS), log="writer.log")
    wait_for("the first worker to run some", lambda: len(ledger(tmp_path)) >= 20)
    os.killpg(first.pid, signal.SIGKILL)  # the supervisor and its worker, mid-run
    first.wait()
    done_by_first = len(ledger(tmp_path))
    assert writer.wait(120) == 0, (tmp_path / "writer.log").read_text()
    assert done_by_first < ROWS  # killed with work left, some of it written after

    start(ONCEFIRE, "worker", "shop.py", log="worker2.log")
    inserted = {f"inserted {i} new" for i in range(1, ROWS + 1)}
    updated = {f"updated {i} new>paid" for i in range(3, ROWS + 1, 3)}
    wait_for("every change", lambda: set(ledger(tmp_path)) >= inserted | updated)
    assert set(ledger(tmp_path)) == inserted | updated  # nothing else: no note update ran
    assert start(sys.executable, "writer.py", url, "teardown", log="down.log").wait(60) == 0


ADDED = """
import sys
import sqlalchemy as sa

url = sys.argv[1].replace("postgresql://", "postgresql+psycopg://", 1)
engine = sa.create_engine(url)
with engine.begin() as conn:
    if sys.argv[2] == "alter":
        conn.execute(sa.text("ALTER TABLE t_e2e_orders ADD COLUMN channel TEXT"))
    else:
        conn.execute(sa.text(
            "INSERT INTO t_e2e_orders (id, status, channel) VALUES (:id, 'new', 'web')"
        ), {"id": int(sys.argv[3])})
engine.dispose()
"""
CHANNEL_APP = APP.replace("{event.data.after['status']}", "{event.data.after.get('channel')}")


@pytest.mark.slow
def test_a_column_added_under_a_live_worker(
    tmp_path: Path, url: str, start: Callable[..., subprocess.Popen[bytes]]
) -> None:
    (tmp_path / "shop.py").write_text(CHANNEL_APP)
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "added.py").write_text(ADDED)
    assert start(sys.executable, "writer.py", url, "setup", log="setup.log").wait(60) == 0
    assert start(ONCEFIRE, "migrate", "shop.py", log="migrate.log").wait(60) == 0
    start(ONCEFIRE, "worker", "shop.py", log="worker.log")
    assert start(sys.executable, "added.py", url, "alter", log="alter.log").wait(60) == 0
    assert start(sys.executable, "added.py", url, "insert", "1", log="i1.log").wait(60) == 0
    wait_for("the first row", lambda: len(ledger(tmp_path)) == 1)
    audit = start(ONCEFIRE, "audit", "shop.py", log="audit.log")
    audit.wait(60)
    said = (tmp_path / "audit.log").read_text()
    if url.startswith("postgresql"):  # whole rows: the new column is there at once
        assert ledger(tmp_path) == ["inserted 1 web"]
        assert "watched-table-changed" not in said
    else:  # the trigger names its columns: the audit says so, and migrate makes it again
        assert ledger(tmp_path) == ["inserted 1 None"]
        assert "watched-table-changed" in said and "oncefire migrate" in said, said
        migrate = start(ONCEFIRE, "migrate", "shop.py", log="migrate2.log")
        assert migrate.wait(60) == 0
        assert (
            "triggers made again for table t_e2e_orders" in (tmp_path / "migrate2.log").read_text()
        )
    assert start(sys.executable, "added.py", url, "insert", "2", log="i2.log").wait(60) == 0
    wait_for("the second row", lambda: len(ledger(tmp_path)) == 2)
    assert ledger(tmp_path)[1] == "inserted 2 web"
    assert start(sys.executable, "writer.py", url, "teardown", log="down.log").wait(60) == 0
