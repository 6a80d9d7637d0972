"""The least a worker's start can wait under the load of the flowing scenario: a probe process
makes durable one-row commits (an UPDATE committed on its own, the least a lease that marks a
start writes) at --probe-rate a second while the paced phase of bench/flowing.py runs, and
reports their latency beside the phase's write -> start latency. A start waits for at least
one such commit after its write's, so the probe's p50 is a floor under the scenario's.

    python bench/ab/commit_floor.py --store postgres --producers 2 --window 10
    python bench/ab/commit_floor.py --store postgres --idle    # the same probe, nothing beside
"""

from __future__ import annotations

import argparse
import multiprocessing
import sqlite3
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import flowing
from benchlib import percentile
from harness import Target, reset, target


def probe(t: Target, start_at: float, seconds: float, rate: float, pipe: Connection) -> None:
    """Paced one-row commits from start_at for seconds; sends each one's latency in ms."""
    if t.kind == "postgres":
        import psycopg

        pg = psycopg.connect(t.url, autocommit=True)
        pg.execute("CREATE TABLE IF NOT EXISTS probe_row (id int PRIMARY KEY, n bigint)")
        pg.execute("INSERT INTO probe_row VALUES (1, 0) ON CONFLICT DO NOTHING")

        def commit() -> None:
            pg.execute("UPDATE probe_row SET n = n + 1 WHERE id = 1")

    else:
        lite = sqlite3.connect(str(t.path), isolation_level=None)
        lite.execute("PRAGMA busy_timeout = 10000")
        lite.execute("PRAGMA synchronous = FULL")  # as the store's workers commit
        lite.execute("CREATE TABLE IF NOT EXISTS probe_row (id INTEGER PRIMARY KEY, n INTEGER)")
        lite.execute("INSERT OR IGNORE INTO probe_row VALUES (1, 0)")

        def commit() -> None:
            lite.execute("UPDATE probe_row SET n = n + 1 WHERE id = 1")

    latencies: list[float] = []
    while True:
        due = start_at + len(latencies) / rate
        if due >= start_at + seconds:
            break
        time.sleep(max(0.0, due - time.monotonic()))
        began = time.perf_counter()
        commit()
        latencies.append((time.perf_counter() - began) * 1000)
    pipe.send(latencies)


def probed_phase(args: Any) -> Any:
    """flowing.phase, with the probe running through its paced phase."""
    plain = flowing.phase
    seen: dict[str, list[float]] = {}

    def phase(pipes: list[Connection], kind: str, seconds: float, rate: float, prefix: str) -> Any:
        if kind != "paced":
            return plain(pipes, kind, seconds, rate, prefix)
        ours, theirs = multiprocessing.get_context("spawn").Pipe()
        start_at = time.monotonic() + flowing.START_DELAY + 0.5  # once the producers run
        process = multiprocessing.get_context("spawn").Process(
            target=probe, args=(args.t, start_at, seconds - 1.0, args.probe_rate, theirs)
        )
        process.start()
        result = plain(pipes, kind, seconds, rate, prefix)
        seen["probe"] = ours.recv()
        process.join()
        return result

    flowing.phase = phase
    return seen


def report(label: str, latencies: list[float]) -> None:
    print(
        f"{label}: {len(latencies)} commits, p50 {percentile(latencies, 50):.2f} ms,"
        f" p90 {percentile(latencies, 90):.2f}, p99 {percentile(latencies, 99):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--probe-rate", type=float, default=100.0)
    parser.add_argument("--idle", action="store_true", help="the probe alone, nothing beside")
    args = parser.parse_args()
    args.t = target(args.store)
    if args.idle:
        reset(args.t)
        ours, theirs = multiprocessing.get_context("spawn").Pipe()
        probe(args.t, time.monotonic() + 0.1, args.window, args.probe_rate, theirs)
        report(f"{args.store}, idle", ours.recv())
        return
    seen = probed_phase(args)
    run = flowing.one_run(args.t, args.producers, args.window, 0.5, 0)
    full, paced = run["full_speed"], run["paced"]
    print(
        f"{args.store}: producers {full['producer_rate']:,.0f}/s at full speed; paced at"
        f" {paced['achieved_rate']:,.0f}/s: write -> start p50 {paced['p50_ms']:.2f} ms,"
        f" p99 {paced['p99_ms']:.2f}"
    )
    report(f"{args.store}, the probe beside the paced phase", seen["probe"])


if __name__ == "__main__":
    main()
