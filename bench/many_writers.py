"""Scenario: many writers. P producer processes (8 by default) write documents at once, each
write its own transaction with one trigger registered, against the same P processes'
raw one-row commits (write_path.RawWriter) on the same database.

Each process holds an oncefire App and a raw connection; the two kinds of write are timed
alternately over fixed windows (raw, oncefire, oncefire, raw; each half of --window), all
processes starting together, after untimed writes of each. The rate is the writes every
process finished within the windows, over their length. No worker runs meanwhile.

--floor times two more kinds in the same way, by plain SQL on oncefire's schema
(bench/plain_sql.py): the rows a write with one trigger stores (document, event,
delivery), and the least a write on this schema can store that commits its event with its
document (document and event): the ceiling of such a write path against the raw commits.

    python bench/many_writers.py --store postgres --producers 8 --window 10 --runs 3
    python bench/many_writers.py --store sqlite --producers 1 --window 6 --runs 3 --floor
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Any

import workload
from benchlib import LoadSampler, common_args, facts, log, summarize, write_json
from oncefire_harness import DOC, Target, reset, target
from plain_sql import PlainSqlWriter
from write_path import RawWriter

START_DELAY = 0.3  # seconds between a phase's command and its common start
WARMUP = 20


def producer(t: Target, index: int, pipe: Connection, floor: bool) -> None:
    """One producer process: writes of the kind asked for, until its window closes (the
    plain-SQL kinds only with floor)."""
    app = workload.build(t.url, "noop")
    raw = RawWriter(t)
    plain = (
        {"plain": PlainSqlWriter(t), "least": PlainSqlWriter(t, with_delivery=False)}
        if floor
        else {}
    )
    col = app.db.collection("bench")
    try:
        for i in range(WARMUP):
            col.document(f"p{index}-warm{i}").set(DOC)
        raw.write(WARMUP, f"p{index}-warm")
        for kind, writer in plain.items():
            writer.write(WARMUP, f"p{index}-warm-{kind}")
        pipe.send("ready")
        while True:
            command = pipe.recv()
            if command[0] == "stop":
                break
            kind, start_at, seconds, prefix = command
            while time.monotonic() < start_at:
                time.sleep(0.001)
            end = start_at + seconds
            done = 0
            key = f"p{index}-{prefix}"
            if kind == "raw":
                while time.monotonic() < end:
                    raw.conn.execute(raw.sql, (f"raw/{key}{done}", raw.data, time.time()))
                    done += 1
            elif kind in plain:
                while time.monotonic() < end:
                    plain[kind].write_one(f"{kind}-{key}{done}")
                    done += 1
            else:
                while time.monotonic() < end:
                    col.document(f"{key}{done}").set(DOC)
                    done += 1
            pipe.send((done, time.monotonic() - start_at))
    finally:
        raw.close()
        for writer in plain.values():
            writer.close()
        app.close()


def phase(pipes: list[Connection], kind: str, seconds: float, prefix: str) -> list[int]:
    """Every producer writes `kind` for `seconds` from one common start; their counts."""
    start_at = time.monotonic() + START_DELAY
    for pipe in pipes:
        pipe.send((kind, start_at, seconds, prefix))
    return [pipe.recv()[0] for pipe in pipes]


def one_run(
    t: Target, producers: int, window: float, run: int, *, floor: bool = False
) -> dict[str, Any]:
    """Start the producers on a fresh store; time raw and document writes alternately (and
    the plain-SQL kinds with floor)."""
    reset(t)
    app = workload.build(t.url, "noop")
    app.store  # noqa: B018 - the schema, before the producers start
    app.close()
    RawWriter(t).close()  # its table too
    context = multiprocessing.get_context("spawn")
    pipes: list[Connection] = []
    processes = []
    for index in range(producers):
        ours, theirs = context.Pipe()
        process = context.Process(target=producer, args=(t, index, theirs, floor), daemon=True)
        process.start()
        pipes.append(ours)
        processes.append(process)
    try:
        for pipe in pipes:
            if not pipe.poll(120):
                raise TimeoutError("a producer process did not start within 120 s")
            pipe.recv()
        half = window / 2
        # Each kind twice, in mirrored order: a drift over the run weighs on all alike.
        order = ["raw", "least", "plain", "doc"] if floor else ["raw", "doc"]
        counts: dict[str, list[int]] = {kind: [0] * producers for kind in order}
        for n, kind in enumerate(order + order[::-1]):
            done = phase(pipes, kind, half, f"{'ab'[n // len(order)]}{run}-")
            counts[kind] = [a + b for a, b in zip(counts[kind], done, strict=True)]
    finally:
        for pipe in pipes:
            pipe.send(("stop",))
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    out = {
        "raw_rate": sum(counts["raw"]) / window,
        "document_rate": sum(counts["doc"]) / window,
        "raw_per_process": counts["raw"],
        "documents_per_process": counts["doc"],
    }
    if floor:
        out["plain_rate"] = sum(counts["plain"]) / window
        out["least_rate"] = sum(counts["least"]) / window
    return out


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--window", type=float, default=10.0, help="seconds of each kind a run")
    parser.add_argument(
        "--floor", action="store_true", help="also plain SQL: all the rows, and the least"
    )
    args = parser.parse_args()
    t = target(args.store)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    runs = []
    with LoadSampler() as sampler:
        for run in range(args.runs):
            runs.append(one_run(t, args.producers, args.window, run, floor=args.floor))
            log_run(t, args, runs[-1], run)
    floors = (
        {
            f"{kind}_ratio": summarize([r[f"{kind}_rate"] / r["raw_rate"] for r in runs])
            for kind in ("plain", "least")
        }
        if args.floor
        else {}
    )
    write_json(
        args.json,
        {
            "scenario": "many_writers",
            "store": args.store,
            "producers": args.producers,
            "window": args.window,
            "raw_commit_rate": summarize([r["raw_rate"] for r in runs]),
            "document_write_rate": summarize([r["document_rate"] for r in runs]),
            "ratio": summarize([r["document_rate"] / r["raw_rate"] for r in runs]),
            **floors,
            "runs": runs,
            "facts": facts(sampler, started),  # when, at which commit, and the load beside it
        },
    )


def log_run(t: Target, args: argparse.Namespace, r: dict[str, Any], run: int) -> None:
    """One run's figures on stderr."""
    floor = (
        f", plain SQL {r['plain_rate']:,.0f}/s ({r['plain_rate'] / r['raw_rate']:.0%}),"
        f" document and event only {r['least_rate']:,.0f}/s"
        f" ({r['least_rate'] / r['raw_rate']:.0%})"
        if args.floor
        else ""
    )
    log(
        f"many writers on {t.label}, run {run + 1}/{args.runs}, {args.producers} processes:"
        f" raw {r['raw_rate']:,.0f}/s, oncefire {r['document_rate']:,.0f}/s"
        f" ({r['document_rate'] / r['raw_rate']:.0%}){floor}"
    )


if __name__ == "__main__":
    main()
