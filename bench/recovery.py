"""Workers under crashes, measured: recovery after SIGKILL, idle CPU and wake-up latency.

    python bench/recovery.py              # test timings (lease 2 s, sweep 0.5 s), idle, wake-up
    python bench/recovery.py --default    # also the default timings (lease 30 s, sweep 5 s)
    python bench/recovery.py --quick      # fewer samples, shorter idle window (a smoke run)

Everything runs `oncefire worker bench/recovery_app.py` as real processes on a fresh SQLite
file. Recovery: a function's first attempt runs until the bench SIGKILLs its process at a
random point between two lease renewals; the figures are the time from the kill until the
attempt is recorded as crashed (rescue) and until the second attempt starts (rerun; the app's
retry policy has first_delay=0 so that no backoff is added). Idle CPU is the worker process's
time on a CPU (/proc/PID/schedstat) over a window with nothing to do. Wake-up is the time
from just before a publish until the function starts, on an idle worker.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchlib import write_json
from oncefire_harness import ONCEFIRE

from oncefire import App, Settings

APP = Path(__file__).resolve().parent / "recovery_app.py"
TEST_TIMINGS = {"ONCEFIRE_LEASE": "2", "ONCEFIRE_RENEW_EVERY": "0.5", "ONCEFIRE_SWEEP_EVERY": "0.5"}
DEFAULT_TIMINGS: dict[str, str] = {}  # lease 30 s, renewed every 10 s, swept every 5 s


class Workers:
    """A running `oncefire worker` with its store, marks and log in a scratch directory."""

    def __init__(self, root: Path, processes: int, env: dict[str, str]) -> None:
        self.root = root
        self.marks = root / "marks"
        self.marks.mkdir(parents=True)
        url = f"sqlite:///{root}/bench.db"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
        environment.update(env, ONCEFIRE_STORE=url, BENCH_DIR=str(self.marks))
        self.log = root / "worker.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [*ONCEFIRE, "worker", str(APP), "--processes", str(processes)],
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.app = App(url)
        wait("workers serving", lambda: self.log.read_text().count(" serving ") >= processes, 60)
        overrides: dict[str, Any] = {
            k.removeprefix("ONCEFIRE_").lower(): float(v) for k, v in env.items()
        }
        self.settings = Settings(**overrides)

    def children(self) -> list[int]:
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True
        )
        return [int(p) for p in out.stdout.split()]

    def start_of(self, event_id: str, attempt: int, timeout: float) -> tuple[int, float]:
        """Wait for an attempt to start; (pid, wall time) of that start."""
        path = self.marks / f"start-{event_id}-{attempt}"
        wait(
            f"attempt {attempt} of {event_id}", lambda: path.exists() and path.read_text(), timeout
        )
        pid, at = path.read_text().split()
        return int(pid), float(at)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.app.close()


@contextmanager
def workers(processes: int, env: dict[str, str]) -> Iterator[Workers]:
    with tempfile.TemporaryDirectory(prefix="oncefire-recovery-") as scratch:
        running = Workers(Path(scratch), processes, env)
        try:
            yield running
        finally:
            running.stop()


def wait(what: str, check: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


def cpu_seconds(pid: int) -> float:
    """Time the process has spent on a CPU, all threads (nanosecond accounting)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def measure_recovery(env: dict[str, str], samples: int) -> list[dict[str, float]]:
    """SIGKILL the process running an attempt; time the rescue and the rerun."""
    results = []
    with workers(2, env) as running:
        settings = running.settings
        bound = settings.lease + settings.sweep_every + 30
        for n in range(samples):
            event_id = running.app.publish("slow", {"sample": n})
            victim, started = running.start_of(event_id, 1, 30)
            # Kill at a random point between two renewals: the lease left then varies from
            # lease - renew_every to lease.
            time.sleep(max(0.0, started + random.uniform(0, settings.renew_every) - time.time()))
            os.kill(victim, signal.SIGKILL)
            killed_at = time.time()
            _, rerun_at = running.start_of(event_id, 2, bound)
            (crashed, *_) = running.app.store.attempts(event_id)
            assert crashed["outcome"] == "crashed", crashed
            results.append(
                {
                    "rescue_s": float(crashed["finished_at"]) - killed_at,
                    "rerun_s": rerun_at - killed_at,
                }
            )
            print(f"  sample {n + 1}: {fmt(results[-1])}", file=sys.stderr, flush=True)
    return results


def measure_idle_and_wakeup(idle_seconds: float, wakeups: int) -> dict[str, Any]:
    """Idle CPU of one worker process (and its supervisor), then write-to-start latency."""
    with workers(1, DEFAULT_TIMINGS) as running:
        (child,) = running.children()
        time.sleep(2.0)  # let start-up work settle
        before = cpu_seconds(child), cpu_seconds(running.proc.pid), time.monotonic()
        time.sleep(idle_seconds)
        after = cpu_seconds(child), cpu_seconds(running.proc.pid), time.monotonic()
        window = after[2] - before[2]
        latencies = []
        for _ in range(wakeups):
            time.sleep(0.5)  # idle again, so that the event has to wake the worker
            published = time.time()
            event_id = running.app.publish("wake", {})
            _, started = running.start_of(event_id, 1, 30)
            latencies.append(started - published)
    latencies.sort()
    return {
        "idle_window_s": round(window, 1),
        "idle_worker_cpu_percent": round(100 * (after[0] - before[0]) / window, 2),
        "idle_supervisor_cpu_percent": round(100 * (after[1] - before[1]) / window, 2),
        "wakeup_ms": {
            "median": round(1000 * statistics.median(latencies), 1),
            "p95": round(1000 * latencies[max(0, int(0.95 * len(latencies)) - 1)], 1),
            "max": round(1000 * latencies[-1], 1),
            "samples": len(latencies),
        },
    }


def fmt(sample: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in sample.items())


def summary(results: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"samples": len(results)}
    for key in ("rescue_s", "rerun_s"):
        values = [r[key] for r in results]
        out[key] = {
            "min": round(min(values), 2),
            "median": round(statistics.median(values), 2),
            "max": round(max(values), 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default", action="store_true", help="also measure default timings")
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--samples", type=int, default=None, help="recovery samples (test timings)")
    parser.add_argument("--json", default=None, help="write the result here (default stdout)")
    args = parser.parse_args()
    samples = args.samples or (2 if args.quick else 8)
    report: dict[str, Any] = {}
    print("idle CPU and wake-up latency ...", file=sys.stderr, flush=True)
    report["idle"] = measure_idle_and_wakeup(10 if args.quick else 30, 5 if args.quick else 20)
    print("recovery after SIGKILL, test timings ...", file=sys.stderr, flush=True)
    report["recovery_test_timings"] = {
        "settings": "lease 2 s, renew every 0.5 s, sweep every 0.5 s",
        **summary(measure_recovery(TEST_TIMINGS, samples)),
    }
    if args.default:
        print("recovery after SIGKILL, default timings ...", file=sys.stderr, flush=True)
        report["recovery_default_timings"] = {
            "settings": "lease 30 s, renew every 10 s, sweep every 5 s",
            **summary(measure_recovery(DEFAULT_TIMINGS, 1 if args.quick else 3)),
        }
    write_json(args.json, report)


if __name__ == "__main__":
    main()
