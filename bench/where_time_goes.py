"""Where the time goes: py-spy on a drain's worker processes, or on a writer, summarised.

--what drain (the default) starts `oncefire worker --processes 2` on a backlog of N no-op
events (the throughput scenario's drain) and records every thread of both worker processes;
--what write records one process writing documents one transaction each with one trigger
registered (the write-path scenario). Idle threads are included, so time spent waiting for a
lock or for the server shows. It writes the speedscope profile (open it at speedscope.app)
with a summary: each thread's time by store operation and by phase (waiting for SQLite's
write lock, commit, other statements, PostgreSQL round trips, the function, Python).

    python bench/where_time_goes.py --store sqlite --seconds 10 --json summary.json
    python bench/where_time_goes.py --what write --store postgres --json summary.json
"""

from __future__ import annotations

import argparse
import json
import linecache
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import workload
from benchlib import BENCH, SRC, WORK, log, write_json
from oncefire_harness import Backlog, backlog_store, reset, target, workers

IDLE_FILES = ("concurrent/futures/thread.py", "threading.py", "selectors.py", "queue.py")
# A blocking call in C, told by its line: `.get()` is an attempt thread waiting for work
# (attempts.AttemptThreads) or a worker for a queue.
IDLE_CALLS = (".get(timeout", ".get()", ".wait(", "sleep(", "select(", ".poll(")
IDLE = "idle (waiting for work)"
# A worker's loop waiting for the attempts it started (their threads' wake-up, the GIL):
# not idle, since work is in hand, and not the functions' own time.
AWAITING = "waiting for its attempts to end"


def py_spy() -> str | None:
    """The py-spy executable: the peers' virtualenv's, else one on PATH."""
    local = BENCH / ".venv-peers" / "bin" / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


def phase_of(frames: list[dict[str, Any]]) -> tuple[str, str]:
    """(operation, phase) of one sample; frames run from the outermost to the leaf."""
    leaf = frames[-1]
    files = [f.get("file") or "" for f in frames]
    names = [f.get("name") or "" for f in frames]
    operation = "-"
    for f, name in zip(files, names, strict=True):
        if "/oncefire/stores/" in f and "." in name and not name.split(".")[-1].startswith("_"):
            operation = name  # the outermost public store method: claim, complete, ...
            break
    if operation == "-":
        for f in files:
            if f.endswith("bench/workload.py"):
                operation = "the function (workload.py)"
                break
    leaf_file = leaf.get("file") or ""
    if operation.endswith(".wait"):
        return "-", IDLE  # a store's wait for new work (inotify, NOTIFY or a poll)
    if "/oncefire/stores/" in leaf_file:
        text = linecache.getline(leaf_file, int(leaf.get("line") or 0)).upper()
        if "BEGIN" in text or "LOCK_EX" in text:
            return operation, "waiting for the write lock (BEGIN)"
        if "COMMIT" in text:
            return operation, "commit (fsync)"
        return operation, "SQL statements"
    if any("/psycopg/" in f for f in files[-6:]):
        return operation, "PostgreSQL round trips"
    if any(f.endswith("logging/__init__.py") for f in files):
        return operation, "logging"
    if operation == "-" and "RunningAttempts.collect" in names:
        return "-", AWAITING
    if operation == "-" and any(leaf_file.endswith(x) for x in IDLE_FILES):
        return "-", IDLE
    text = linecache.getline(leaf_file, int(leaf.get("line") or 0)) if leaf_file else ""
    if operation == "-" and any(w in text for w in IDLE_CALLS):
        return "-", IDLE  # a blocking call in C: the line shows it
    if (operation == "-" and names[-1] in ("sleep", "wait")) or "SqliteStore.wait" in names:
        return "-", IDLE
    if "/oncefire/" in leaf_file:
        return operation, "oncefire Python code"
    return operation, "other Python (stdlib, driver)"


# The writer that --what write profiles: `set` of one document a transaction, until told.
WRITER = """
import sys, time
import workload
from oncefire_harness import DOC
app = workload.build(sys.argv[1], "noop")
col = app.db.collection("bench")
col.document("warm").set(DOC)
deadline = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < deadline:
    col.document(f"profiled-{n}").set(DOC)
    n += 1
with open(sys.argv[3], "w") as out:
    out.write(str(n))
"""


WRITER_GROUP = "the writer (one document write a transaction)"


def thread_group(profile_name: str, what: str = "drain") -> str:
    """Which thread a speedscope profile is: a worker's loop or attempt thread, or the writer."""
    if what == "write":
        # The writer's own thread; the store's helper threads (its pool) are named oncefire-*.
        is_helper = '"oncefire' in profile_name
        return "other threads" if is_helper else WRITER_GROUP
    if "oncefire-attempt" in profile_name:
        return "attempt threads (run the functions)"
    if '"MainThread"' in profile_name:
        return "loop thread (claims, records, waits)"
    return "other threads"


def short_path(file: str) -> str:
    """A frame's file as the page shows it: from the package on (oncefire/..., json/...),
    without the folders of the machine it ran on."""
    return re.sub(r"^.*(/src/|/site-packages/|/lib/python3\.\d+/)", "", file)


def summarize_profile(path: Path, what: str = "drain") -> dict[str, Any]:
    """Samples of the profiled threads grouped by thread, operation and phase."""
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    by_phase: Counter[str] = Counter()
    by_group: dict[str, Counter[str]] = {}
    by_operation: Counter[str] = Counter()
    by_both: Counter[tuple[str, str]] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for profile in data["profiles"]:
        if "oncefire-parent" in profile.get("name", ""):
            continue  # a watchdog thread that only sleeps
        group = by_group.setdefault(thread_group(profile.get("name", ""), what), Counter())
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            chain = [frames[i] for i in stack]
            is_worker = any(
                "oncefire.processes.supervisor" in (f.get("name") or "") for f in chain[:3]
            )
            if what == "drain" and not is_worker:
                continue  # the supervisor process itself only sleeps: the workers are its children
            if what == "write" and group is not by_group.get(WRITER_GROUP):
                continue  # the pool's and the listener's threads only wait
            chain = [f for f in chain if not (f.get("name") or "").startswith("process ")]
            if not chain:
                continue
            operation, phase = phase_of(chain)
            by_phase[phase] += weight
            group[phase if operation == "-" else f"{operation} / {phase}"] += weight
            by_both[(operation, phase)] += weight
            if phase not in (IDLE, AWAITING):
                by_operation[operation] += weight
                leaf = chain[-1]
                file = short_path(leaf.get("file") or "")
                leaves[f"{leaf.get('name')} ({file}:{leaf.get('line')})"] += weight
            total += weight
    busy = total - by_phase[IDLE] - by_phase[AWAITING]

    def share(counter: Counter[Any], base: float, top: int) -> list[dict[str, Any]]:
        return [
            {"what": " / ".join(k) if isinstance(k, tuple) else k, "share": v / base}
            for k, v in counter.most_common(top)
            if base
        ]

    return {
        "samples": total,
        "busy_samples": busy,
        "phases": share(by_phase, total, 12),
        "threads": {
            name: share(counts, sum(counts.values()), 8)
            for name, counts in sorted(by_group.items())
            if sum(counts.values())
        },
        "busy_by_operation_and_phase": share(
            Counter({k: v for k, v in by_both.items() if k[1] not in (IDLE, AWAITING)}), busy, 12
        ),
        "busy_by_operation": share(by_operation, busy, 8),
        "top_leaves": share(leaves, busy, 10),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--what", choices=["drain", "write"], default="drain")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--function", default="noop")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=100, help="samples per second")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    spy = py_spy()
    if spy is None:
        sys.exit("py-spy is not installed: bench/run_all installs it in bench/.venv-peers")
    t = target(args.store)
    if args.what == "write":
        write_json(args.json, profile_writes(spy, t, args.seconds, args.rate))
        return
    backlog_store(t, args.function, args.n)  # the throughput scenario's backlog, copied
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"profile-{args.store}-{args.function}.speedscope.json"
    backlog = Backlog(t, args.function)
    try:
        with workers(t, args.function) as supervisor:
            # Record once both workers are past start-up and draining.
            deadline = time.monotonic() + 60
            while backlog() > args.n - max(1, args.n // 40) and time.monotonic() < deadline:
                time.sleep(0.02)
            before = backlog()
            t0 = time.monotonic()
            subprocess.run(
                [
                    spy,
                    "record",
                    "--pid",
                    str(supervisor.pid),
                    "--subprocesses",
                    "--idle",
                    "--full-filenames",
                    "--rate",
                    str(args.rate),
                    "--duration",
                    str(int(args.seconds)),
                    "--format",
                    "speedscope",
                    "--output",
                    str(out),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=args.seconds + 60,
            )
            seconds = time.monotonic() - t0
            after = backlog()
    finally:
        backlog.close()
    summary = summarize_profile(out)
    summary.update(
        {
            "what": "drain",
            "store": args.store,
            "function": args.function,
            "seconds": seconds,
            "events_during_profile": before - after,
            "events_per_second_under_profiler": (before - after) / seconds,
            # Idle time after the backlog ran out would pass for the drain's own.
            "backlog_ran_out": after == 0,
            "profile_file": os.path.relpath(out, BENCH.parent),
            "command": f"py-spy record --subprocesses --idle --rate {args.rate} "
            "--format speedscope --pid <oncefire worker supervisor>",
        }
    )
    log(
        f"profile of a {t.label} drain: {summary['events_per_second_under_profiler']:,.0f}"
        f" events/s under the profiler, {out}"
    )
    write_json(args.json, summary)


def profile_writes(spy: str, t: Any, seconds: float, rate: int) -> dict[str, Any]:
    """py-spy on one process writing documents (one trigger registered) for `seconds`."""
    reset(t)
    workload.build(t.url, "noop").close()  # the schema and the trigger, before timing
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"profile-{t.kind}-write.speedscope.json"
    count = WORK / "profile-writes.txt"
    command = [sys.executable, "-c", WRITER, t.url, str(seconds), str(count)]
    record = [spy, "record", "--idle", "--full-filenames", "--rate", str(rate), "--format"]
    paths = [str(SRC), str(BENCH), os.environ.get("PYTHONPATH", "")]
    subprocess.run(
        [*record, "speedscope", "--output", str(out), "--", *command],
        check=True,
        capture_output=True,
        timeout=seconds + 60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)},
    )
    writes = int(count.read_text())
    summary = summarize_profile(out, "write")
    summary.update(
        {
            "what": "write",
            "store": t.kind,
            "function": "noop",
            "seconds": seconds,
            "writes_during_profile": writes,
            "writes_per_second_under_profiler": writes / seconds,
            "profile_file": os.path.relpath(out, BENCH.parent),
            "command": f"py-spy record --idle --rate {rate} --format speedscope -- "
            "python <one doc.set a transaction>",
        }
    )
    log(
        f"profile of {t.label} document writes: {summary['writes_per_second_under_profiler']:,.0f}"
        f" writes/s under the profiler, {out}"
    )
    return summary


if __name__ == "__main__":
    main()
