"""The per-event drain (16 processes x 1 thread, batch_size 1) of a whole backlog, start to
end rather than a window of it, with the largest size the store's WAL reached meanwhile: for
an A/B of trees of src (PYTHONPATH and BENCH_SRC pick the one measured; delete
bench/.work/oncefire-backlog-* between trees whose schemas differ).

    python bench/ab/per_event_whole_drain.py --n 30000
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drain import PER_EVENT, drain_only
from harness import target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=30_000)
    args = parser.parse_args()
    t = target("sqlite")
    wal = f"{t.path}-wal"
    largest = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal largest
        while not done.wait(0.2):
            if os.path.exists(wal):
                largest = max(largest, os.path.getsize(wal))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        result = drain_only(t, "noop", args.n, 600.0, window=None, setup=PER_EVENT)
    finally:
        done.set()
        watcher.join()
    print(
        f"per-event whole drain of {args.n:,}: {result['rate']:,.0f} events/s, "
        f"the WAL at most {largest / 1e6:.1f} MB ({time.monotonic() - started:.0f} s in all)"
    )


if __name__ == "__main__":
    main()
