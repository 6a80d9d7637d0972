"""Issue 48 point 3: `oncefire backup` and `oncefire restore` for SQLite. A restored store goes
on from the moment of its backup: its pending deliveries run, its dead letters stay, its
`@idempotent` records keep a redelivery from running the effect again, a schedule tick it had
fired is not fired again; what ran after the backup runs again. Refusals are one clear line."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from oncefire import App, idempotent
from oncefire.cli import main
from oncefire.errors import ConfigError, StoreError
from oncefire.events import Event
from oncefire.operations import backups
from oncefire.testing import TestClock, deliver, make_event

MINUTE = 60.0


class Runs:
    """What the functions of one test ran."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self.charges: list[str] = []
        self.later: list[str] = []


def build(url: str, clock: TestClock, runs: Runs) -> App:
    """An App with a schedule, an @idempotent charge, a failing function and a plain one."""
    app = App(url, clock=clock)

    @app.on_schedule("every 1 minute", name="report")
    def report(event: Event) -> None:
        runs.ticks.append(event.data["scheduled_time"])

    @app.on_message("pay", name="charge")
    @idempotent(lease=60)
    def charge(event: Event) -> str:
        runs.charges.append(event.id)
        return "charged"

    @app.on_message("bad", name="bad", retry=False)
    def bad(event: Event) -> None:
        raise ValueError("refused")

    @app.on_message("later", name="later")
    def later(event: Event) -> None:
        runs.later.append(event.id)

    return app


def test_a_restored_store_goes_on_from_its_backup(tmp_path: Path, clock: TestClock) -> None:
    start, runs = clock.now(), Runs()
    original_url = f"sqlite:///{tmp_path}/original.db"
    original = build(original_url, clock, runs)
    original.drain()
    clock.advance(MINUTE)
    paid = original.publish("pay", {"amount": 5})
    original.publish("bad", {})
    original.drain(functions=["report", "charge", "bad"])  # the tick of start + 60 fires
    later = original.publish("later", {})  # pending at the backup
    made = backups.backup(original_url, tmp_path / "backup.db")
    assert made.schema > 0 and made.size > 0
    original.drain()  # runs after the backup: not in it
    original.close()
    assert runs.ticks == [start + MINUTE] and runs.later == [later]

    restored_url = f"sqlite:///{tmp_path}/restored.db"
    backups.restore(tmp_path / "backup.db", restored_url, now=clock.now())
    restored = build(restored_url, clock, runs)
    try:
        restored.drain()
        assert runs.later == [later, later]  # pending in the backup: runs again
        assert runs.ticks == [start + MINUTE]  # its tick record is in the backup
        assert restored.dead_letters.count() == 1
        # Its @idempotent record is in the backup: a redelivery does not charge again.
        event = make_event("message.published", "pay", {"amount": 5}, id=paid)
        deliver(restored, "charge", event, times=1)
        assert runs.charges == [paid]
        clock.advance(MINUTE)
        restored.drain()
        assert runs.ticks == [start + MINUTE, start + 2 * MINUTE]
    finally:
        restored.close()


def test_a_backup_is_refused_for_what_is_not_a_sqlite_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pg_dump"):
        backups.backup("postgresql://db1,db2/app", tmp_path / "b.db")
    with pytest.raises(ConfigError, match="in memory"):
        backups.backup("sqlite://:memory:", tmp_path / "b.db")
    with pytest.raises(ConfigError, match="No oncefire store"):
        backups.backup(str(tmp_path / "missing.db"), tmp_path / "b.db")
    made = App(f"sqlite:///{tmp_path}/s.db")
    made.db.document("orders/o1").set({"n": 1})
    made.close()
    (tmp_path / "b.db").write_text("")
    with pytest.raises(ConfigError, match="exists"):
        backups.backup(str(tmp_path / "s.db"), tmp_path / "b.db")
    with pytest.raises(ConfigError, match="does not exist"):
        backups.backup(str(tmp_path / "s.db"), tmp_path / "no" / "b.db")


def test_a_restore_never_replaces_a_store_unasked_nor_one_in_use(
    tmp_path: Path, clock: TestClock
) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    app = App(url, clock=clock)
    app.db.document("orders/o1").set({"n": 1})
    backups.backup(url, tmp_path / "b.db")
    app.db.document("orders/o2").set({"n": 2})
    with pytest.raises(ConfigError, match="--force"):
        backups.restore(tmp_path / "b.db", url, now=clock.now())

    @app.on_message("t", name="hold")
    def hold(event: Event) -> None:
        with pytest.raises(ConfigError, match="Workers are running 1 deliveries"):
            backups.restore(tmp_path / "b.db", url, now=clock.now(), is_forced=True)

    app.publish("t", {})
    app.drain()
    app.close()
    backups.restore(tmp_path / "b.db", url, now=clock.now(), is_forced=True)
    restored = App(url, clock=clock)
    try:
        assert restored.db.document("orders/o1").get().exists
        assert not restored.db.document("orders/o2").get().exists  # written after the backup
    finally:
        restored.close()


def test_a_damaged_backup_is_refused_and_nothing_is_replaced(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\x01" * 5000)
    with pytest.raises(StoreError):
        backups.restore(damaged, str(tmp_path / "new.db"), now=0.0)
    assert not (tmp_path / "new.db").exists()
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not an oncefire store"):
        backups.restore(foreign, str(tmp_path / "new.db"), now=0.0)


def run(*argv: str) -> Any:
    """The oncefire command, in process."""
    return CliRunner().invoke(main, list(argv))


def test_the_commands_back_up_and_restore_and_refuse_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    app = App(url)
    app.db.document("orders/o1").set({"n": 1})
    app.close()
    made = run("backup", url, str(tmp_path / "b.db"))
    assert made.exit_code == 0, made.output
    assert "integrity ok" in made.stdout and f"store: {url}" in made.stderr
    with sqlite3.connect(tmp_path / "b.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    restored = run("restore", str(tmp_path / "b.db"), str(tmp_path / "r.db"))
    assert restored.exit_code == 0, restored.output
    read = run("doc", "get", "orders/o1", "--store", f"sqlite:///{tmp_path}/r.db")
    assert read.exit_code == 0 and '"n": 1' in read.stdout
    for argv, words in [
        (("backup", "postgresql://db/app", str(tmp_path / "p.db")), "pg_basebackup"),
        (("restore", str(tmp_path / "b.db"), url), "--force"),
        (("restore", str(tmp_path / "none.db"), str(tmp_path / "x.db")), "No backup"),
    ]:
        refused = run(*argv)
        assert refused.exit_code == 1 and "Traceback" not in refused.output
        lines = [line for line in refused.stderr.splitlines() if not line.startswith("store: ")]
        assert len(lines) == 1 and words in lines[0], refused.stderr
