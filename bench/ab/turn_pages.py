"""Pages an event's commits write to SQLite's WAL with per-event acknowledgement: an
in-process drain of N no-op events by one worker with one slot and batches of one (a commit an
event), with automatic checkpoints off, so the WAL keeps every frame the drain's commits
appended; frames per event = the pages each event's commit wrote (page numbers are not named
by b-tree here: pages change owners as the tables grow during the drain). For an A/B of two
trees (PYTHONPATH picks the tree; trees before the Runtime take the App).

    PYTHONPATH=<tree>/src python bench/ab/turn_pages.py --n 2000
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import workload
from btrees import wal_frames
from harness import prefill, reset, target

import oncefire
from oncefire.worker import Worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    os.environ["ONCEFIRE_CONCURRENCY"] = "1"
    os.environ["ONCEFIRE_BATCH_SIZE"] = "1"
    t = target("sqlite", "turn-pages")
    assert t.path is not None
    reset(t)
    app = workload.build(t.url, "noop")
    prefill(app, args.n)
    app.close()
    with sqlite3.connect(t.path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connect = sqlite3.connect

    def no_checkpoints(*a: Any, **k: Any) -> sqlite3.Connection:
        opened: sqlite3.Connection = connect(*a, **k)
        opened.execute("PRAGMA wal_autocheckpoint = 0")
        return opened

    sqlite3.connect = no_checkpoints  # type: ignore[assignment]
    app = workload.build(t.url, "noop")
    worker = Worker(cast(Any, getattr(app, "runtime", app)))
    wal = Path(f"{t.path}-wal")
    already = len(wal_frames(wal)[0])
    summary = worker.drain()
    pages = wal_frames(wal)[0][already:]
    worker.shutdown()
    app.close()
    assert summary.attempts == args.n, summary
    tree = Path(oncefire.__file__).parent.parent.parent
    print(f"{tree}: {len(pages) / args.n:.2f} pages written an event ({args.n:,} events)")


if __name__ == "__main__":
    main()
