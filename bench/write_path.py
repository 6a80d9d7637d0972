"""Scenario 2, write path: document writes per second with one trigger registered, against
two baselines on the same database: the store's raw one-row commit rate (a plain INSERT per
transaction), and the same rows oncefire writes (document, event, delivery) written by
plain SQL in one transaction per write (bench/plain_sql.py): oncefire's own overhead. Beside
them, the document and its event only by plain SQL: the least a write on this schema can
store that commits its event with its document, the ceiling of such a write path against the
raw commits.

One writer, one transaction per write, durable settings (SQLite synchronous=FULL in WAL
mode, as oncefire opens it; PostgreSQL synchronous_commit on). No worker runs meanwhile.
The four are measured in turn, 100 writes of one at a time (the order reversed every round),
after 100 untimed writes of each. Then the b-trees each kind of write touches are measured
from what the store wrote (bench/btrees.py) and, on SQLite, the cost of a commit by the
b-trees it writes (bench/commit_pages.py).

    python bench/write_path.py --store sqlite --writes 3000 --runs 3
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import commit_pages
import workload
from benchlib import LoadSampler, common_args, facts, log, summarize, write_json
from btrees import postgres_btrees, sqlite_btrees
from oncefire_harness import DOC, Target, reset, target
from plain_sql import PlainSqlWriter

from oncefire.model import codec

WARMUP = 100
CHUNK = 100  # writes of one kind in a row


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


def btrees(t: Target, samples: int) -> dict[str, Any]:
    """The b-trees touched per write by each kind of write, on a fresh store."""
    reset(t)
    if t.kind == "postgres":
        return {
            name: postgres_btrees(t.url, make, samples, f"{name}-")
            for name, make in postgres_writers(t).items()
        }
    assert t.path is not None
    app = workload.build(t.url, "noop")
    app.migrate()  # oncefire's tables first: the raw writers add tables of their own beside them
    raw = RawWriter(t)
    plain = PlainSqlWriter(t)
    writers: dict[str, Any] = {
        "oncefire": lambda count, prefix: oncefire_writes(app, count, f"bt-{prefix}"),
        "plain_sql": plain.write,
        "raw": raw.write,
    }
    out: dict[str, Any] = {}
    try:
        # Every writer warmed up first, so that no set-up of one lands in another's figures.
        for name, write in writers.items():
            write(20, f"{name}-warm-")
        for name, write in writers.items():
            out[name] = sqlite_btrees(t.path, write, samples, f"{name}-")
    finally:
        raw.close()
        plain.close()
        app.close()
    return out


def postgres_writers(t: Target) -> dict[str, Any]:
    """Makers of each kind of writer: its write and its close."""

    def once() -> tuple[Any, Any]:
        app = workload.build(t.url, "noop")
        return (lambda count, prefix: oncefire_writes(app, count, f"bt-{prefix}")), app.close

    def plain() -> tuple[Any, Any]:
        writer = PlainSqlWriter(t)
        return writer.write, writer.close

    def raw() -> tuple[Any, Any]:
        writer = RawWriter(t)
        return writer.write, writer.close

    return {"oncefire": once, "plain_sql": plain, "raw": raw}


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--btree-samples", type=int, default=50, help="0: not measured")
    parser.add_argument("--commit-pages", type=int, default=1500, help="commits; 0: skipped")
    args = parser.parse_args()
    t = target(args.store)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with LoadSampler() as sampler:
        result = measure(t, args)
    result["facts"] = facts(sampler, started)  # when, at which commit, and the load beside it
    write_json(args.json, result)


def prefixed(write: Callable[[int, str], float], head: str, count: int, prefix: str) -> float:
    """A writer's write with its keys' prefix set apart (two writers share a table)."""
    return write(count, head + prefix)


def alternated(
    writers: dict[str, Callable[[int, str], float]], count: int, prefix: str
) -> dict[str, float]:
    """Each writer's rate over `count` writes, written CHUNK at a time in turn, the order
    reversed every round."""
    seconds = dict.fromkeys(writers, 0.0)
    order = list(writers)
    for n, start in enumerate(range(0, count, CHUNK)):
        size = min(CHUNK, count - start)
        for name in order if n % 2 == 0 else order[::-1]:
            seconds[name] += size / writers[name](size, f"{prefix}{n}-")
    return {name: count / spent for name, spent in seconds.items()}


def measure(t: Target, args: argparse.Namespace) -> dict[str, Any]:
    """The write path's figures on one store, as main's options ask."""
    raw_rates: list[float] = []
    plain_rates: list[float] = []
    least_rates: list[float] = []
    doc_rates: list[float] = []
    for run in range(args.runs):
        reset(t)
        app = workload.build(t.url, "noop")  # one trigger on bench/{id}
        app.store  # noqa: B018 - the schema, before the plain SQL writes into it
        oncefire_writes(app, 1, f"s{run}-")
        raw = RawWriter(t)
        plain = PlainSqlWriter(t)
        least = PlainSqlWriter(t, with_delivery=False)
        try:
            raw.write(WARMUP, f"w{run}-")
            plain.write(WARMUP, f"w{run}-")
            least.write(WARMUP, f"least-w{run}-")
            oncefire_writes(app, WARMUP, f"w{run}-")
            # Chunks of CHUNK writes in turn, the order reversed every round, so drift on a
            # shared machine (a disk's flush time wanders by a tenth within seconds) hits all
            # four alike.
            rates = alternated(
                {
                    "raw": raw.write,
                    "least": partial(prefixed, least.write, "least-"),
                    "plain": plain.write,
                    "oncefire": partial(oncefire_writes, app),
                },
                args.writes,
                f"a{run}-",
            )
        finally:
            raw.close()
            plain.close()
            least.close()
            app.close()
        raw_rates.append(rates["raw"])
        plain_rates.append(rates["plain"])
        least_rates.append(rates["least"])
        doc_rates.append(rates["oncefire"])
        log(
            f"write path on {t.label}, run {run + 1}/{args.runs}: raw {raw_rates[-1]:,.0f}/s,"
            f" document and event only {least_rates[-1]:,.0f}/s"
            f" ({least_rates[-1] / raw_rates[-1]:.0%} of raw),"
            f" plain SQL {plain_rates[-1]:,.0f}/s, oncefire {doc_rates[-1]:,.0f}/s"
            f" ({doc_rates[-1] / raw_rates[-1]:.0%} of raw,"
            f" {doc_rates[-1] / plain_rates[-1]:.0%} of plain SQL)"
        )
    result: dict[str, Any] = {
        "scenario": "write_path",
        "store": args.store,
        "writes": args.writes,
        "raw_commit_rate": summarize(raw_rates),
        "plain_sql_rate": summarize(plain_rates),
        "least_rate": summarize(least_rates),
        "ratio_least": summarize([x / r for x, r in zip(least_rates, raw_rates, strict=True)]),
        "document_write_rate": summarize(doc_rates),
        "ratio": summarize([d / r for d, r in zip(doc_rates, raw_rates, strict=True)]),
        "ratio_plain_sql": summarize([d / p for d, p in zip(doc_rates, plain_rates, strict=True)]),
    }
    if args.btree_samples > 0:
        result["btrees"] = btrees(t, args.btree_samples)
        for name, found in result["btrees"].items():
            log(
                f"b-trees a write on {t.label}, {name}: {found['btrees_per_write']['median']}"
                f" ({', '.join(k for k, v in found['touched'].items() if v >= 0.5)})"
            )
    if args.store == "sqlite" and args.commit_pages > 0:
        result["commit_pages"] = commit_pages.measure(args.commit_pages, args.runs)
        log(f"commit cost by b-trees written: {result['commit_pages']['us_per_commit']}")
    return result


if __name__ == "__main__":
    main()
