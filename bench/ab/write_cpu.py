"""A SQLite document write's cost in process: `doc.set(...)` (the store's own write), the same
write in a transaction (`tx.set`), and the same rows by plain SQL (bench/plain_sql.py), one
writer, timed in alternated chunks of 200 writes on one store file, median and first
quartile of the chunks in µs a write. On tmpfs (`--dir /dev/shm`, the default) a commit does
not wait for a disk, so the figures are the writes' CPU; on a disk folder they are wall time.

    python bench/ab/write_cpu.py --rounds 40
    BENCH_SRC=/tmp/wt/src PYTHONPATH=/tmp/wt/src python bench/ab/write_cpu.py  # another tree
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import DOC, Target
from plain_sql import PlainSqlWriter

from oncefire import App
from oncefire.events import Event

CHUNK = 200
WARMUP = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/dev/shm", help="folder of the store file")
    parser.add_argument("--rounds", type=int, default=40, help="chunks of each kind")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="oncefire-write-cpu-", dir=args.dir))
    path = folder / "w.db"
    app = App(f"sqlite:///{path}")
    try:

        @app.on_document_written("bench/{id}")
        def noop(event: Event) -> None:
            pass

        col = app.db.collection("bench")
        plain = PlainSqlWriter(Target("sqlite", f"sqlite:///{path}", path), function="noop")

        def in_transaction(key: str) -> None:
            with app.db.transaction() as tx:
                tx.set(col.document(key), DOC)

        kinds: dict[str, Callable[[str], None]] = {
            "set()": lambda key: col.document(key).set(DOC),
            "tx.set()": in_transaction,
            "plain SQL": plain.write_one,
        }
        for name, write in kinds.items():
            for i in range(WARMUP):
                write(f"warm-{name}-{i}")
        times: dict[str, list[float]] = {name: [] for name in kinds}
        for r in range(args.rounds):
            for name, write in kinds.items():
                t0 = time.perf_counter()
                for i in range(CHUNK):
                    write(f"{name}-{r}-{i}")
                times[name].append(1e6 * (time.perf_counter() - t0) / CHUNK)
        plain.close()
    finally:
        app.close()
        shutil.rmtree(folder)
    medians = {name: statistics.median(chunks) for name, chunks in times.items()}
    for name, chunks in times.items():
        quartile = statistics.quantiles(chunks, n=4)[0]
        print(f"{name:10} {medians[name]:7.1f} µs a write (first quartile {quartile:.1f})")
    for name in ("set()", "tx.set()"):
        print(f"plain SQL / {name}: {medians['plain SQL'] / medians[name]:.2f}")


if __name__ == "__main__":
    main()
