"""Scenario: events flowing. oncefire's workers run (`--processes 2`, defaults) while P
producer processes write documents, one transaction each, with one trigger registered.

Full speed: the producers write as fast as they can for --window seconds; the events run
by the end of it (written less the deliveries still pending or running, counted as the
producers stop) over the time taken are the end-to-end rate, beside the producers' rate
(goal: the workers keep up, >= 90 %). Paced: the producers write at --share (50 %) of that
rate, on a fixed schedule (a late write goes at once: the schedule does not wait for the
store), for --window seconds; each write's latency runs from its commit to its function's
first line (reported over loopback UDP on CLOCK_MONOTONIC, as bench/latency.py does).

    python bench/flowing.py --store sqlite --producers 2 --window 10 --runs 3
"""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import workload
from benchlib import (
    LATENCY_PORT_ENV,
    LoadSampler,
    common_args,
    facts,
    log,
    percentile,
    summarize,
    wait_until,
    write_json,
)
from oncefire_harness import DOC, Backlog, Target, prefill, reset, target, workers

FUNCTION = "latency"
START_DELAY = 0.3
SKIP = 0.05  # the first share of a paced phase's writes is not counted (its ramp-up)


class Starts:
    """Every start report of the benchmark function, gathered by a thread: key -> stamp."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.env = {LATENCY_PORT_ENV: str(self.sock.getsockname()[1])}
        self.stamps: dict[str, float] = {}
        self.stopped = False
        self.thread = threading.Thread(target=self.gather, daemon=True)
        self.thread.start()

    def gather(self) -> None:
        while not self.stopped:
            try:
                data = self.sock.recv(256).decode()
            except TimeoutError:
                continue
            key, _, stamp = data.partition(" ")
            self.stamps[key] = float(stamp)

    def close(self) -> None:
        self.stopped = True
        self.thread.join(2)
        self.sock.close()


def producer(t: Target, index: int, pipe: Connection) -> None:
    """One producer process: full-speed or paced writes, as the parent asks."""
    app = workload.build(t.url, FUNCTION)
    col = app.db.collection("bench")
    try:
        pipe.send("ready")
        while True:
            command = pipe.recv()
            if command[0] == "stop":
                break
            kind, start_at, seconds, rate, prefix = command
            key = f"p{index}-{prefix}"
            while time.monotonic() < start_at:
                time.sleep(0.001)
            end = start_at + seconds
            commits: list[float] = []
            while True:
                if kind == "paced":
                    due = start_at + len(commits) / rate
                    if due >= end:
                        break
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                elif time.monotonic() >= end:
                    break
                col.document(f"{key}{len(commits)}").set(DOC)
                commits.append(time.monotonic())
            pipe.send((len(commits), commits if kind == "paced" else []))
    finally:
        app.close()


def phase(
    pipes: list[Connection], kind: str, seconds: float, rate: float, prefix: str
) -> tuple[float, list[tuple[int, list[float]]]]:
    """Every producer writes from one common start; (the start, what each reported)."""
    start_at = time.monotonic() + START_DELAY
    for pipe in pipes:
        pipe.send((kind, start_at, seconds, rate, prefix))
    return start_at, [pipe.recv() for pipe in pipes]


def one_run(
    t: Target, producers: int, window: float, share: float, run: int, rate: float | None = None
) -> dict[str, Any]:
    reset(t)
    app = workload.build(t.url, FUNCTION)
    app.store  # noqa: B018 - the schema, before the workers start
    starts = Starts()
    backlog = Backlog(t, FUNCTION)
    context = multiprocessing.get_context("spawn")
    pipes: list[Connection] = []
    processes = []
    try:
        with workers(t, FUNCTION, extra_env=starts.env):
            prefill(app, 200, prefix="w")
            wait_until(lambda: backlog() == 0, 120, "the warm-up events to run")
            for index in range(producers):
                ours, theirs = context.Pipe()
                process = context.Process(target=producer, args=(t, index, theirs), daemon=True)
                process.start()
                pipes.append(ours)
                processes.append(process)
            for pipe in pipes:
                if not pipe.poll(120):
                    raise TimeoutError("a producer process did not start within 120 s")
                pipe.recv()
            start_at, reports = phase(pipes, "full", window, 0.0, f"f{run}-")
            written = sum(n for n, _ in reports)
            left = backlog()
            counted = time.monotonic()
            t0 = time.monotonic()
            wait_until(lambda: backlog() == 0, 300, "the full-speed backlog to run")
            lag = time.monotonic() - t0
            producer_rate = written / window
            full = {
                "written": written,
                "producer_rate": producer_rate,
                "end_to_end_rate": (written - left) / (counted - start_at),
                "left_when_producers_stopped": left,
                "seconds_to_run_what_was_left": lag,
            }
            full["keep_up"] = full["end_to_end_rate"] / producer_rate
            paced_rate = share * producer_rate if rate is None else rate
            rate_each = paced_rate / producers
            _, reports = phase(pipes, "paced", window, rate_each, f"s{run}-")
            keys = [
                (f"p{i}-s{run}-{n}", stamp)
                for i, (_, commits) in enumerate(reports)
                for n, stamp in enumerate(commits)
            ]
            wait_until(lambda: backlog() == 0, 120, "the paced events to run")
            time.sleep(0.3)  # the last start reports in flight
    finally:
        for pipe in pipes:
            pipe.send(("stop",))
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
        backlog.close()
        starts.close()
        app.close()
    skip = int(len(keys) * SKIP)
    samples = [(starts.stamps[k] - c) * 1000 for k, c in keys[skip:] if k in starts.stamps]
    missing = len(keys) - skip - len(samples)
    paced = {
        "target_rate": paced_rate,
        "achieved_rate": len(keys) / window,
        "samples": len(samples),
        "missing": missing,
        "p50_ms": percentile(samples, 50) if samples else None,
        "p99_ms": percentile(samples, 99) if samples else None,
    }
    return {"full_speed": full, "paced": paced}


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--window", type=float, default=10.0, help="seconds of each phase")
    parser.add_argument("--share", type=float, default=0.5, help="paced load, of full speed")
    parser.add_argument(
        "--rate", type=float, help="paced load in writes/s instead (the same for an A/B of trees)"
    )
    args = parser.parse_args()
    t = target(args.store)
    runs = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with LoadSampler() as sampler:
        for run in range(args.runs):
            runs.append(one_run(t, args.producers, args.window, args.share, run, args.rate))
            full, paced = runs[-1]["full_speed"], runs[-1]["paced"]
            log(
                f"events flowing on {t.label}, run {run + 1}/{args.runs}: producers"
                f" {full['producer_rate']:,.0f}/s, end to end {full['end_to_end_rate']:,.0f}/s"
                f" ({full['keep_up']:.0%}); at {paced['achieved_rate']:,.0f}/s: p50"
                f" {paced['p50_ms'] or 0:.2f} ms, p99 {paced['p99_ms'] or 0:.2f} ms"
                f" ({paced['missing']} missing)"
            )
    write_json(
        args.json,
        {
            "scenario": "flowing",
            "store": args.store,
            "producers": args.producers,
            "window": args.window,
            "share": args.share,
            "producer_rate": summarize([r["full_speed"]["producer_rate"] for r in runs]),
            "end_to_end_rate": summarize([r["full_speed"]["end_to_end_rate"] for r in runs]),
            "keep_up": summarize([r["full_speed"]["keep_up"] for r in runs]),
            "paced_rate": summarize([r["paced"]["achieved_rate"] for r in runs]),
            "p50_ms": summarize([r["paced"]["p50_ms"] for r in runs]),
            "p99_ms": summarize([r["paced"]["p99_ms"] for r in runs]),
            "missing": sum(r["paced"]["missing"] for r in runs),
            "runs": runs,
            "facts": facts(sampler, started),  # when, at which commit, and the load beside it
        },
    )


if __name__ == "__main__":
    main()
