"""Issue 48 point 4: `oncefire backup` of a SQLite store under load (a producer and two worker
processes running), restored into a new file, and run to completion there.

The backup passes `PRAGMA integrity_check`. The restored store is the store at a moment
between the command's start and its end: every write acknowledged before the start is in it
and runs to success; what ran after that moment runs again on the restored store, which only
`@idempotent` outside effects show (a committed effect behind `tx.claim` never repeats, its
claim being in the backup or not with it). The restore rewinds the first run's workers as a
kill would, so the checker is told of one for each of them when the restore is made.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

from tests.chaos import ledger
from tests.chaos.checker import check
from tests.chaos.harness import ONCEFIRE, Workers, facts, produce, unsettled, wait_for
from tests.chaos.ledger import Entry

EVENTS = 600
REPEAT_BOUND = 5.0  # seconds before the backup within which a first run's record may miss it


def acknowledged(folder: Path) -> int:
    """How many writes the producer has acknowledged so far."""
    return sum(1 for e in ledger.read(folder) if e.kind == "ack")


def command(*argv: str) -> subprocess.CompletedProcess[str]:
    """The oncefire command, in a process of its own."""
    return subprocess.run([ONCEFIRE, *argv], capture_output=True, text=True, timeout=120)


def test_a_backup_under_load_restores_to_a_store_that_finishes(
    tmp_path: Path, folder: Path
) -> None:
    store, copy = f"sqlite:///{tmp_path}/chaos.db", tmp_path / "backup.db"
    workers = Workers(store, folder, processes=2)
    producer = produce(store, folder, "items", "record", EVENTS, batch=20, pause=0.05)
    try:
        wait_for("a third of the writes", lambda: acknowledged(folder) >= EVENTS // 3, 60)
        began = time.time_ns()
        made = command("backup", store, str(copy))
        backed_up_at = time.time_ns()
        assert made.returncode == 0, made.stderr
        assert producer.poll() is None, "the backup came after the load"
    finally:
        workers.stop()
        if producer.poll() is None:
            producer.kill()
            producer.wait(10)
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

    restored = f"sqlite:///{tmp_path}/restored.db"
    assert command("restore", str(copy), restored).returncode == 0
    rewound_at = time.time_ns()
    second = tmp_path / "ledger-restored"
    second.mkdir()
    workers = Workers(restored, second, processes=2)
    try:
        wait_for("the restored store to drain", lambda: unsettled(restored) == 0, 120)
    finally:
        workers.stop()

    first_run = ledger.read(folder)
    end_state = facts(restored)
    kept = {key for _, key in end_state.deliveries}
    promised = {e.key for e in first_run if e.kind == "ack" and e.at < began}
    assert promised <= kept, sorted(promised - kept)[:10]
    # The writes the restored store holds are its promises; the first run's lines about the
    # others are about writes the restore took back.
    kills = [
        Entry("kill", "", 0, rewound_at, {"victim": pid})
        for pid in {e.pid for e in first_run if e.kind == "start"}
    ]
    entries = sorted(
        [e for e in first_run if e.key in kept] + kills + ledger.read(second),
        key=lambda e: e.at,
    )
    report = check(entries, end_state)
    effects = Counter(e.key for e in entries if e.kind == "effect")
    first_effect = {e.key: e.at for e in reversed(entries) if e.kind == "effect"}
    repeated = [k for k, n in effects.items() if n > 1]
    print(
        f"\n[chaos] backup under load: {made.stdout.strip()} in "
        f"{(backed_up_at - began) / 1e9:.2f} s; {len(promised)} writes acknowledged before it, "
        f"{len(kept)} in it; {len(repeated)} outside effects repeated on the restored store; "
        f"{report.summary()}"
    )
    assert report.acknowledged == len(kept)
    assert not (report.lost or report.unexpected or report.unfinished), report.summary()
    assert not (report.duplicate_committed or report.orphan_effects), report.summary()
    assert not report.duplicate_outside and report.dead == {}, report.summary()
    early = [k for k in repeated if first_effect[k] < began - REPEAT_BOUND * 1e9]
    assert early == [], "effects whose record was in the backup ran again"
