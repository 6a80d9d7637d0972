"""Write → start latency on idle SQLite workers, taken apart: bench/latency.py's measurement
(one write at a time, 5-25 ms apart, `oncefire worker --processes 2`) with every SQLite write
transaction of every process noted (bench/ab/lock_probe). For each write, the workers'
transaction that committed last before the function started is its lease: from the write's
commit to the worker asking for the lock (negative: it asked while the write was still
committing), the wait for the lock, the lease's transaction, and from its commit to the
function's first line; averaged over the fastest half, the slowest tenth and fiftieth.

    BENCH_SRC=<tree>/src PYTHONPATH=<tree>/src python bench/ab/latency_trace.py --writes 500
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
PROBE_DIR = tempfile.mkdtemp(prefix="oncefire-lock-probe-")
# Set before the workers start, so that their processes load the probe.
os.environ["LOCK_PROBE_DIR"] = PROBE_DIR
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(HERE / "lock_probe"), os.environ.get("PYTHONPATH")) if p
)

import workload  # noqa: E402
from benchlib import LatencyProbe  # noqa: E402
from harness import DOC, reset, target, workers  # noqa: E402

Transaction = tuple[int, float, float, float]  # pid, asked for the lock, got it, committed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=500)
    args = parser.parse_args()
    pairs = measure(args.writes)
    rows = sorted(taken_apart(pairs, transactions()))
    print(
        f"{len(rows)} writes: p50 {rows[len(rows) // 2][0]:.2f} ms,"
        f" p99 {rows[int(len(rows) * 0.99)][0]:.2f} ms"
    )
    for label, part in (
        ("fastest half", rows[: len(rows) // 2]),
        ("slowest tenth", rows[int(len(rows) * 0.9) :]),
        ("slowest fiftieth", rows[int(len(rows) * 0.98) :]),
    ):
        means = [statistics.fmean(column) for column in zip(*part, strict=True)]
        print(
            f"{label:16} latency {means[0]:.2f} ms = commit to asking {means[1]:+.2f}, waiting"
            f" for the lock {means[2]:.2f}, the lease {means[3]:.2f}, its commit to the start"
            f" {means[4]:.2f}; workers' transactions meanwhile {means[5]:.2f}"
        )


def measure(count: int) -> list[tuple[float, float]]:
    """(the write's commit, the function's start) of each write, CLOCK_MONOTONIC seconds."""
    t = target("sqlite")
    reset(t)
    app = workload.build(t.url, "latency")
    app.store  # noqa: B018 - the schema, before the workers start
    col = app.db.collection("bench")
    probe = LatencyProbe()
    pairs = []
    try:
        with workers(t, "latency", extra_env=probe.env):
            col.document("ready").set(DOC)
            if probe.wait_for("ready", timeout=60) is None:
                raise TimeoutError("the oncefire workers did not start within 60 s")
            rng = random.Random(6)
            for i in range(20 + count):
                col.document(f"k{i}").set(DOC)
                committed = time.monotonic()
                started = probe.wait_for(f"k{i}")
                if i >= 20 and started is not None:
                    pairs.append((committed, started))
                time.sleep(rng.uniform(0.005, 0.025))
    finally:
        probe.close()
        app.close()
    return pairs


def transactions() -> list[Transaction]:
    """Every write transaction the workers committed, from the probe's files."""
    found = []
    for path in Path(PROBE_DIR).glob("*.txt"):
        pid = int(path.stem)
        if pid == os.getpid():
            continue
        for line in path.read_text().splitlines():
            asked, got, done = map(float, line.split())
            found.append((pid, asked, got, done))
    return found


def taken_apart(
    pairs: list[tuple[float, float]], txs: list[Transaction]
) -> list[tuple[float, float, float, float, float, int]]:
    """(latency, commit to asking, lock wait, lease, lease's commit to start, workers'
    transactions in between) in ms, for each write whose lease was found."""
    rows = []
    for committed, started in pairs:
        inside = [x for x in txs if x[1] >= committed - 0.002 and x[3] <= started]
        if not inside:
            continue
        _, asked, got, done = max(inside, key=lambda x: x[3])
        rows.append(
            (
                (started - committed) * 1000,
                (asked - committed) * 1000,
                (got - asked) * 1000,
                (done - got) * 1000,
                (started - done) * 1000,
                len(inside),
            )
        )
    return rows


if __name__ == "__main__":
    main()
