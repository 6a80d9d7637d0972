"""Scenario 2, write path: document writes per second with one trigger registered, against the
store's raw one-row commit rate (a plain INSERT per transaction on the same database).

One writer, one transaction per write, durable settings (SQLite synchronous=FULL in WAL
mode, as oncefire opens it; PostgreSQL synchronous_commit on). No worker runs meanwhile.
The two are measured alternately in each run, after 100 untimed writes of each.

    python bench/write_path.py --store sqlite --writes 3000 --runs 3
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import workload
from benchlib import common_args, log, summarize, write_json
from harness import DOC, Target, reset, target

from oncefire import codec

WARMUP = 100


class RawWriter:
    """Plain one-row INSERTs, each its own durable transaction, beside oncefire's tables."""

    def __init__(self, t: Target) -> None:
        self.kind = t.kind
        self.conn: Any
        if t.kind == "sqlite":
            self.conn = sqlite3.connect(str(t.path), isolation_level=None, timeout=30)
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = FULL")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY, path TEXT,"
                " data TEXT, at REAL)"
            )
            self.sql = "INSERT INTO bench_raw (path, data, at) VALUES (?, ?, ?)"
        else:
            import psycopg

            self.conn = psycopg.connect(t.url, autocommit=True)
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, path text,"
                " data jsonb, at double precision)"
            )
            self.sql = "INSERT INTO bench_raw (path, data, at) VALUES (%s, %s, %s)"
        self.data = codec.dumps(DOC)

    def write(self, count: int, prefix: str) -> float:
        """Write count rows one transaction each (autocommit); return rows per second."""
        t0 = time.perf_counter()
        for i in range(count):
            self.conn.execute(self.sql, (f"raw/{prefix}{i}", self.data, time.time()))
        return count / (time.perf_counter() - t0)

    def close(self) -> None:
        self.conn.close()


def oncefire_writes(app: Any, count: int, prefix: str) -> float:
    """Write count documents through app.db, one transaction each; writes per second."""
    col = app.db.collection("bench")
    t0 = time.perf_counter()
    for i in range(count):
        col.document(f"{prefix}{i}").set(DOC)
    return count / (time.perf_counter() - t0)


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--writes", type=int, default=3000)
    args = parser.parse_args()
    t = target(args.store)
    raw_rates: list[float] = []
    doc_rates: list[float] = []
    for run in range(args.runs):
        reset(t)
        app = workload.build(t.url, "noop")  # one trigger on bench/{id}
        raw = RawWriter(t)
        try:
            raw.write(WARMUP, f"w{run}-")
            oncefire_writes(app, WARMUP, f"w{run}-")
            # Alternate halves so drift on a shared machine hits both alike.
            half = args.writes // 2
            r1 = raw.write(half, f"a{run}-")
            d1 = oncefire_writes(app, half, f"a{run}-")
            d2 = oncefire_writes(app, args.writes - half, f"b{run}-")
            r2 = raw.write(args.writes - half, f"b{run}-")
        finally:
            raw.close()
            app.close()
        raw_rates.append(2 / (1 / r1 + 1 / r2))
        doc_rates.append(2 / (1 / d1 + 1 / d2))
        log(
            f"write path on {t.label}, run {run + 1}/{args.runs}: raw {raw_rates[-1]:,.0f}/s,"
            f" oncefire {doc_rates[-1]:,.0f}/s ({doc_rates[-1] / raw_rates[-1]:.0%})"
        )
    write_json(
        args.json,
        {
            "scenario": "write_path",
            "store": args.store,
            "writes": args.writes,
            "raw_commit_rate": summarize(raw_rates),
            "document_write_rate": summarize(doc_rates),
            "ratio": summarize([d / r for d, r in zip(doc_rates, raw_rates, strict=True)]),
        },
    )


if __name__ == "__main__":
    main()
