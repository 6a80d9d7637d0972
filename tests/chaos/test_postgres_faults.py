"""PostgreSQL restarts (fast and immediate) and terminated backends under load, on a private
cluster the test starts itself: nothing acknowledged is lost, no effect is committed twice, the
workers resume by themselves and none of them exits."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.chaos import ledger
from tests.chaos.harness import Profile, Workers, outcomes, produce, unsettled, verdict, wait_for

pytestmark = pytest.mark.postgres


def ended_after(folder: Path, at: int) -> bool:
    """Whether an attempt ended after a time.time_ns() moment."""
    return any(e.kind == "end" and e.at > at for e in ledger.read(folder))


def repeats(folder: Path, keys: list[tuple[str, str]], log: Path) -> str:
    """What the ledger and the workers' log say about repeated outside effects: each line of
    the keys, in seconds from the fault nearest to it, and the log's @idempotent warnings."""
    entries = ledger.read(folder)
    faults = [e for e in entries if e.kind == "fault" and e.get("phase") == "begin"]
    lines = []
    for _, key in keys:
        for e in (e for e in entries if e.key == key):
            near = min(faults, key=lambda f: abs(f.at - e.at), default=None)
            when = (
                "" if near is None else f"{(e.at - near.at) / 1e9:+.3f} s from {near.get('fault')}"
            )
            lines.append(
                f"{key} {e.kind} pid {e.pid} attempt {e.get('attempt')} ok {e.get('ok')} {when}"
            )
    warnings = [
        line
        for line in log.read_text(errors="replace").splitlines()
        if "idempotency key" in line or "lease lost" in line or "lost the lease" in line
    ]
    return "\n".join([*lines, f"{len(warnings)} log lines on leases and keys:", *warnings[-20:]])


def test_restarts_and_terminated_backends_lose_nothing(
    pg_cluster: Any, folder: Path, profile: Profile
) -> None:
    store = pg_cluster.create_database("chaos_restarts")
    workers = Workers(store, folder, processes=2)
    producer = produce(store, folder, "items", "record", profile.events, batch=20)
    recoveries: list[tuple[str, float, float]] = []
    try:
        for n in range(profile.restarts):
            wait_for(
                "work before the fault",
                lambda: ended_after(folder, time.time_ns() - 500_000_000),
                60,
            )
            fault = ("fast", "immediate", "terminate")[n % 3]
            workers.book.write("fault", "", fault=fault, phase="begin", sync=True)
            if fault == "terminate":
                away = 0.0
                pg_cluster.terminate_backends("chaos_restarts")
            else:
                away = pg_cluster.restart(fault)
            up = time.time_ns()
            workers.book.write("fault", "", fault=fault, phase="up", sync=True)
            wait_for(
                f"work after the {fault} fault",
                partial(ended_after, folder, up),
                60,
                workers.log,
            )
            recoveries.append((fault, away, (time.time_ns() - up) / 1e9))
        assert producer.wait(600) == 0
        wait_for("every delivery to settle", lambda: unsettled(store) == 0, 300, workers.log)
        assert workers.proc is not None and workers.proc.poll() is None, "the workers exited"
    finally:
        workers.stop()
        if producer.poll() is None:
            producer.kill()
    report = verdict(store, folder)
    print(
        f"\n[chaos] postgres faults (fault, seconds away, seconds to the next end): {recoveries}; "
        f"attempts {dict(outcomes(store, 'record'))}; {report.summary()}"
    )
    assert report.acknowledged == profile.events
    assert not (report.lost or report.unexpected or report.unfinished), report.summary()
    assert not report.duplicate_committed and report.dead == {}, report.summary()
    # Issue 11 point 26: a holder cut off by a restart between its effect and its completion
    # has its lease plus TAKE_OVER_AFTER to complete before another worker may take the key.
    if report.duplicate_outside:
        details = repeats(folder, report.duplicate_outside, workers.log)
        pytest.fail(f"repeated outside effects {report.duplicate_outside}:\n{details}")
