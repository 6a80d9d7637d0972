"""How long one retention batch holds the write lock: a store with N succeeded deliveries
(one attempt each, 1 KB payloads), all past the retention, is purged batch by batch; each
batch's transaction is timed (on SQLite the write lock is held for exactly that long).

    python bench/purge_batches.py --store sqlite --n 20000 --batch 500
    python bench/purge_batches.py --store postgresql://postgres@127.0.0.1/db --n 20000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from oncefire import App
from oncefire.retention import cutoffs
from oncefire.testing import TestClock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="sqlite")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--synchronous", default="FULL", help="SQLite: FULL or NORMAL")
    args = parser.parse_args()
    url = args.store
    if url == "sqlite":
        url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'purge.db'}"
    clock = TestClock()
    extra = {"sqlite_synchronous": args.synchronous} if url.startswith("sqlite") else {}
    app = App(url, clock=clock, purge_batch=args.batch, **extra)

    @app.on_document_created("orders/{o}")
    def ship(event: object) -> None: ...

    blob = "x" * 1000
    for start in range(0, args.n, 1000):
        with app.db.transaction() as tx:
            for n in range(start, min(start + 1000, args.n)):
                tx.set(app.db.document(f"orders/o{n}"), {"blob": blob})
        app.drain()
    clock.advance(app.settings.succeeded_retention + 1)
    before = cutoffs(app.settings, clock.now())["finished"]
    times = []
    while True:
        started = time.perf_counter()
        counts = app.store.purge("finished", before, args.batch)
        times.append((time.perf_counter() - started) * 1000)
        if counts["deliveries"] < args.batch:
            break
    times.sort()
    print(
        f"{app.store.dialect}: {len(times)} batches of {args.batch} deliveries (with their "
        f"attempts and events): median {statistics.median(times):.1f} ms, "
        f"p95 {times[int(len(times) * 0.95)]:.1f} ms, max {times[-1]:.1f} ms"
    )
    app.close()


if __name__ == "__main__":
    main()
