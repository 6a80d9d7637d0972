"""What a durable SQLite commit costs by the b-trees it writes: one row into 1, 3 or 5 tables
(each with one index) per transaction, WAL with synchronous=FULL as oncefire opens it.

A document write with one trigger changes about 9 pages (document and its index, event and
its key, delivery with its due and event indexes, the id sequence) where the write path's raw
baseline changes 1 or 2: this tells how much of the gap between them the commit alone makes.

    python bench/commit_pages.py --commits 1500 --runs 3
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time
from typing import Any

from benchlib import WORK, summarize

TABLES = (1, 3, 5)


def measure(commits: int, runs: int) -> dict[str, Any]:
    """Microseconds a commit of one row into each of 1, 3 and 5 tables, per run."""
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / "commit-pages.db"
    for suffix in ("", "-wal", "-shm"):
        (WORK / f"commit-pages.db{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for i in range(max(TABLES)):
        conn.execute(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, k TEXT, data TEXT)")
        conn.execute(f"CREATE INDEX t{i}_k ON t{i} (k)")
    data = "x" * 200
    results: dict[int, list[float]] = {n: [] for n in TABLES}
    for _ in range(runs):
        for n in TABLES:
            t0 = time.perf_counter()
            for _ in range(commits):
                conn.execute("BEGIN IMMEDIATE")
                for i in range(n):
                    conn.execute(
                        f"INSERT INTO t{i} (k, data) VALUES (?, ?)", (os.urandom(8).hex(), data)
                    )
                conn.execute("COMMIT")
            results[n].append((time.perf_counter() - t0) / commits * 1e6)
    conn.close()
    return {
        "commits": commits,
        "us_per_commit": {f"{2 * n} b-trees": summarize(results[n]) for n in TABLES},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    figures = measure(args.commits, args.runs)["us_per_commit"]
    for n in TABLES:
        runs = figures[f"{2 * n} b-trees"]
        print(
            f"{n} table(s), {2 * n} b-trees a commit: {runs['median']:,.0f} µs a commit"
            f" (median of {len(runs['runs'])}; {runs['min']:,.0f}-{runs['max']:,.0f})"
        )


if __name__ == "__main__":
    main()
