"""Scenario: many writers. P producer processes (8 by default) write documents at once, each
write its own transaction with one trigger registered, against the same P processes'
raw one-row commits (write_path.RawWriter) on the same database.

Each process holds an oncefire App and a raw connection; the two kinds of write are timed
alternately over fixed windows (raw, oncefire, oncefire, raw; each half of --window), all
processes starting together, after untimed writes of each. The rate is the writes every
process finished within the windows, over their length. No worker runs meanwhile.

    python bench/many_writers.py --store postgres --producers 8 --window 10 --runs 3
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Any

import workload
from benchlib import common_args, log, summarize, write_json
from harness import DOC, Target, reset, target
from write_path import RawWriter

START_DELAY = 0.3  # seconds between a phase's command and its common start
WARMUP = 20


def producer(t: Target, index: int, pipe: Connection) -> None:
    """One producer process: writes of the kind asked for, until its window closes."""
    app = workload.build(t.url, "noop")
    raw = RawWriter(t)
    col = app.db.collection("bench")
    try:
        for i in range(WARMUP):
            col.document(f"p{index}-warm{i}").set(DOC)
        raw.write(WARMUP, f"p{index}-warm")
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
            else:
                while time.monotonic() < end:
                    col.document(f"{key}{done}").set(DOC)
                    done += 1
            pipe.send((done, time.monotonic() - start_at))
    finally:
        raw.close()
        app.close()


def phase(pipes: list[Connection], kind: str, seconds: float, prefix: str) -> list[int]:
    """Every producer writes `kind` for `seconds` from one common start; their counts."""
    start_at = time.monotonic() + START_DELAY
    for pipe in pipes:
        pipe.send((kind, start_at, seconds, prefix))
    return [pipe.recv()[0] for pipe in pipes]


def one_run(t: Target, producers: int, window: float, run: int) -> dict[str, Any]:
    """Start the producers on a fresh store; time raw and document writes alternately."""
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
        process = context.Process(target=producer, args=(t, index, theirs), daemon=True)
        process.start()
        pipes.append(ours)
        processes.append(process)
    try:
        for pipe in pipes:
            if not pipe.poll(120):
                raise TimeoutError("a producer process did not start within 120 s")
            pipe.recv()
        half = window / 2
        raw1 = phase(pipes, "raw", half, f"a{run}-")
        doc1 = phase(pipes, "doc", half, f"a{run}-")
        doc2 = phase(pipes, "doc", half, f"b{run}-")
        raw2 = phase(pipes, "raw", half, f"b{run}-")
    finally:
        for pipe in pipes:
            pipe.send(("stop",))
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    raw_each = [a + b for a, b in zip(raw1, raw2, strict=True)]
    doc_each = [a + b for a, b in zip(doc1, doc2, strict=True)]
    return {
        "raw_rate": sum(raw_each) / window,
        "document_rate": sum(doc_each) / window,
        "raw_per_process": raw_each,
        "documents_per_process": doc_each,
    }


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--window", type=float, default=10.0, help="seconds of each kind a run")
    args = parser.parse_args()
    t = target(args.store)
    runs = []
    for run in range(args.runs):
        runs.append(one_run(t, args.producers, args.window, run))
        r = runs[-1]
        log(
            f"many writers on {t.label}, run {run + 1}/{args.runs}, {args.producers} processes:"
            f" raw {r['raw_rate']:,.0f}/s, oncefire {r['document_rate']:,.0f}/s"
            f" ({r['document_rate'] / r['raw_rate']:.0%})"
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
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
