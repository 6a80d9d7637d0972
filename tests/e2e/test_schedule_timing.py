"""A schedule keeps time under `oncefire worker --processes 2`, on the real clock: every tick
of `every 1 second` fires once across the two processes, within a second of its time, though
the workers sweep once a minute and poll every 5 s (a tick never waits for either).

Schedules run in real time, so this test waits real seconds (about 10); it measures each
tick's lateness as the store recorded it: the event's time minus its scheduled time."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from oncefire import App
from tests.e2e.cli_support import ONCEFIRE, poll_until

pytestmark = pytest.mark.e2e

APP_SOURCE = """
from oncefire import App

app = App()  # the store from ONCEFIRE_STORE


@app.on_schedule("every 1 second")
def tick(event):
    pass
"""
WATCHED = 8  # seconds of ticks checked, once both processes serve


def tick_events(store_url: str) -> list[tuple[str, float, float]]:
    """(event id, scheduled time, event time) of every schedule tick in the store."""
    sql = "SELECT id, time, data FROM oncefire_events WHERE type = 'schedule.tick'"
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///"), timeout=30) as db:
            rows: list[Any] = db.execute(sql).fetchall()
    else:
        import psycopg

        with psycopg.connect(store_url) as pg:
            rows = pg.execute(sql).fetchall()
    found = []
    for event_id, at, data in rows:
        data = json.loads(data) if isinstance(data, str) else data
        found.append((event_id, float(data["scheduled_time"]), float(at)))
    return sorted(found, key=lambda row: row[1])


def test_every_tick_fires_once_within_a_second_across_two_processes(
    tmp_path: Path, store_url: str
) -> None:
    (tmp_path / "ticking.py").write_text(APP_SOURCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env.update(
        ONCEFIRE_STORE=store_url,
        ONCEFIRE_SWEEP_EVERY="60",
        ONCEFIRE_POLL_INTERVAL="5",
        ONCEFIRE_SHUTDOWN_GRACE="5",
    )
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [ONCEFIRE, "worker", "ticking.py", "--processes", "2"],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    app = App(store_url)
    try:
        poll_until(
            "2 worker processes serving",
            lambda: log_path.read_text().count(" serving ") >= 2,
            60,
        )
        first = math.floor(time.time()) + 1  # the first tick both processes were up for
        last = first + WATCHED

        def has_run_last() -> bool:
            ids = [event_id for event_id, due, _ in tick_events(store_url) if due >= last]
            return any(s == "succeeded" for i in ids for _, s, _ in app.store.delivery_states(i))

        poll_until(f"the tick due at {last} to run", has_run_last, WATCHED + 30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        ticks = [t for t in tick_events(store_url) if first <= t[1] <= last]
        expected = [float(second) for second in range(first, last + 1)]
        assert [due for _, due, _ in ticks] == expected, log_path.read_text()
        lateness = {due: at - due for _, due, at in ticks}
        assert all(0 <= late < 1.0 for late in lateness.values()), lateness
        for event_id, _, _ in ticks:  # each tick ran once, by one of the two processes
            assert app.store.delivery_states(event_id) == [("tick", "succeeded", 1)]
    finally:
        app.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
