"""Shared helpers of the benchmarks: timing, summaries, drain watching, latency probes.

Standard library only (psycopg and redis are imported where used), so the peers' scripts,
which run in their own virtualenv without oncefire, use it too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work"
# The oncefire source measured: this checkout's, or another tree's (A/B of a change).
SRC = Path(os.environ.get("BENCH_SRC") or ROOT / "src").resolve()

PG_HOST = os.environ.get("BENCH_PG_HOST", "127.0.0.1")
# BENCH_PG_PORT measures on another server of this machine (e.g. a private cluster with the
# default settings, autovacuum on, when the shared one runs with it off).
PG_PORT = os.environ.get("BENCH_PG_PORT", "5432")
PG_ADMIN_URL = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/postgres"
# BENCH_DB_SUFFIX keeps the PostgreSQL databases of two checkouts measuring at once apart.
DB_SUFFIX = os.environ.get("BENCH_DB_SUFFIX", "")
ONCEFIRE_PG_DB = f"oncefire_bench{DB_SUFFIX}"
PROCRASTINATE_PG_DB = f"procrastinate_bench{DB_SUFFIX}"
REDIS_URL = "redis://127.0.0.1:6379/13"  # a db of our own: only this one is ever flushed

# Seconds between looks at a queue's backlog while timing a drain (every system alike: a
# count answered from an index, ten times a second); set-up waits look more often.
POLL = 0.1
WAIT_POLL = 0.02
LATENCY_PORT_ENV = "BENCH_LATENCY_PORT"


def pg_url(database: str) -> str:
    """A loopback PostgreSQL URL for one of the benchmarks' databases."""
    return f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{database}"


def ensure_database(name: str) -> None:
    """Create a benchmark database if it is absent (never the `test` one of the test suite)."""
    import psycopg

    assert name.endswith("_bench") or "_bench_" in name, name
    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Median with min and max of a list of per-run figures."""
    clean = [float(v) for v in values if v is not None]
    if not clean:
        return {"median": None, "min": None, "max": None, "runs": []}
    return {
        "median": statistics.median(clean),
        "min": min(clean),
        "max": max(clean),
        "runs": clean,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def write_json(path: str | Path | None, value: Any) -> None:
    """Write a result as JSON (to stdout when no path is given)."""
    text = json.dumps(value, indent=2, sort_keys=True, default=str)
    if path is None:
        print(text)
    else:
        Path(path).write_text(text + "\n")


def common_args(description: str) -> argparse.ArgumentParser:
    """The options every scenario script takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=3, help="measured runs (default 3)")
    parser.add_argument("--json", default=None, help="write the result here (default stdout)")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=90.0,
        help="longest one measured drain may take before it is cut short (default 90)",
    )
    return parser


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextmanager
def phase(what: str) -> Iterator[None]:
    """Log how long a step of a scenario took (set-up included: where the sitting's time goes)."""
    t0 = time.monotonic()
    try:
        yield
    finally:
        log(f"    ({what}: {time.monotonic() - t0:.1f} s)")


# -- draining -----------------------------------------------------------------------------


def time_drain(
    remaining: Callable[[], int],
    total: int,
    *,
    warmup: int,
    max_seconds: float,
    started: float | None = None,
) -> dict[str, Any]:
    """Watch a backlog of `total` items until it is empty.

    Timing starts once `warmup` items are done (so process start-up is excluded for every
    system alike) or at `started` when given, and ends when nothing is left. A drain that
    runs past max_seconds is cut short and its rate is taken over what it did finish.
    """
    deadline = time.monotonic() + max_seconds + 120.0  # start-up is bounded too
    t0, done0 = (started, 0) if started is not None else (None, 0)
    left = total
    while True:
        left = remaining()
        now = time.monotonic()
        if t0 is None and total - left >= warmup:
            t0, done0 = now, total - left
            deadline = now + max_seconds
        if left <= 0 or now >= deadline or (t0 is not None and now - t0 >= max_seconds):
            break
        time.sleep(WAIT_POLL)
    end = time.monotonic()
    if t0 is None:
        return {"rate": None, "seconds": None, "done": total - left, "capped": True}
    done = (total - left) - done0
    seconds = max(end - t0, 1e-9)
    return {
        "rate": done / seconds,
        "seconds": seconds,
        "done": done,
        "left": left,
        "capped": left > 0,
    }


def time_window(
    remaining: Callable[[], int],
    has_work: Callable[[], bool],
    total: int,
    *,
    warmup: int,
    window: float,
    startup: float = 120.0,
) -> dict[str, Any]:
    """The rate at which a backlog of `total` items is worked off over a fixed window.

    The backlog is counted every 20 ms until `warmup` items are done (process start-up is
    excluded for every system alike); the window starts there and ends `window` seconds
    later with a second count: the rate is the items done between the two counts, each
    stamped at the middle of its query. Within the window only has_work() is asked, every
    100 ms (an existence check the queue answers from an index, cheap however large the
    backlog): when the backlog runs out first the window ends there (`short`), and the rate
    is over the time it lasted.
    """

    def count() -> tuple[int, float]:
        before = time.monotonic()
        left = remaining()
        return left, (before + time.monotonic()) / 2

    deadline = time.monotonic() + startup
    while True:
        left, t0 = count()
        if total - left >= warmup or left <= 0:
            break
        if time.monotonic() >= deadline:
            return {"rate": None, "seconds": None, "done": total - left, "capped": True}
        time.sleep(WAIT_POLL)
    done0 = total - left
    is_short = False
    while left > 0 and time.monotonic() - t0 < window:
        time.sleep(min(POLL, max(0.0, t0 + window - time.monotonic())))
        if time.monotonic() - t0 < window and not has_work():
            is_short = True
            break
    left, end = count()
    seconds = max(end - t0, 1e-9)
    done = (total - left) - done0
    return {
        "rate": done / seconds,
        "seconds": seconds,
        "done": done,
        "left": left,
        "window": window,
        "short": is_short or left <= 0,
        "capped": False,
    }


# -- processes ----------------------------------------------------------------------------


def start_process(
    cmd: Sequence[str], *, env: dict[str, str] | None = None, log_path: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a command in its own process group, its output to a log file."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(
        list(cmd),
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_process(process: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    """SIGTERM a process we started (and its group), then SIGKILL it if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            process.wait(grace)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # its group: the children it started
    if process.poll() is None:
        process.wait(5)


@contextmanager
def running(
    cmd: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    grace: float = 20.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """A started process, stopped on exit (SIGTERM, then SIGKILL after `grace` seconds)."""
    process = start_process(cmd, env=env, log_path=log_path)
    try:
        yield process
    finally:
        stop_process(process, grace)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll check() until it is true; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(WAIT_POLL)


# -- latency ------------------------------------------------------------------------------


def report_start(key: str) -> None:
    """Called first thing in a benchmark function: tell the latency probe it started."""
    port = os.environ.get(LATENCY_PORT_ENV)
    if not port:
        return
    stamp = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on the host
    sock = _udp()
    sock.sendto(f"{key} {stamp!r}".encode(), ("127.0.0.1", int(port)))


_SOCKET: socket.socket | None = None


def _udp() -> socket.socket:
    global _SOCKET
    if _SOCKET is None:
        _SOCKET = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    return _SOCKET


class LatencyProbe:
    """Receives the start reports of benchmark functions on a loopback UDP port."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.env = {LATENCY_PORT_ENV: str(self.port)}

    def wait_for(self, key: str, timeout: float = 10.0) -> float | None:
        """The monotonic time the function with this key started, or None on a time-out."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(256).decode()
            except TimeoutError:
                return None
            got, _, stamp = data.partition(" ")
            if got == key:
                return float(stamp)

    def close(self) -> None:
        """Release the port."""
        self.sock.close()


def measure_latency(
    submit: Callable[[str], None],
    probe: LatencyProbe,
    *,
    count: int,
    warmup: int,
    prefix: str,
    seed: int = 6,
) -> dict[str, Any]:
    """submit(key) then wait for its function to start, `count` times, one at a time.

    The clock starts when submit returns (the write or enqueue is acknowledged). A random
    pause of 5-25 ms between writes lets the worker go idle and keeps its polling from
    locking into step with the writes.
    """
    rng = random.Random(seed)
    samples: list[float] = []
    missing = 0
    for i in range(warmup + count):
        key = f"{prefix}-{i}"
        submit(key)
        committed = time.monotonic()
        started = probe.wait_for(key)
        if started is None:
            missing += 1
        elif i >= warmup:
            samples.append((started - committed) * 1000)
        time.sleep(rng.uniform(0.005, 0.025))
    if not samples:
        return {"p50_ms": None, "p99_ms": None, "samples": 0, "missing": missing}
    return {
        "p50_ms": percentile(samples, 50),
        "p99_ms": percentile(samples, 99),
        "mean_ms": statistics.fmean(samples),
        "samples": len(samples),
        "missing": missing,
    }


# -- the machine --------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """What this machine is, for the results page."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    return info


def cpu_probe() -> float:
    """µs a JSON round trip of a small document takes in this process, the best of 5 rounds
    of 20,000: one thread's speed, to compare sittings on a shared machine whose speed
    varies from day to day."""
    doc = {"amount": 500, "item": "coffee beans", "note": "x" * 48, "tags": [1, 2.5, None]}
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(20_000):
            json.loads(json.dumps(doc))
        best = min(best, time.perf_counter() - started)
    return round(best / 20_000 * 1e6, 2)


def wake_probe() -> float:
    """µs a wake-up round trip between two threads takes (one item on a queue each way), the
    best of 3 rounds of 20,000: what handing work between threads costs on this machine (on a
    virtual machine, tens of µs when the other thread's core idles), to compare sittings."""
    there: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    back: queue.SimpleQueue[int] = queue.SimpleQueue()

    def echo() -> None:
        while (item := there.get()) is not None:
            back.put(item)

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for n in range(20_000):
            there.put(n)
            back.get()
        best = min(best, time.perf_counter() - started)
    there.put(None)
    thread.join()
    return round(best / 20_000 * 1e6, 1)


class LoadSampler:
    """The machine's 1-minute load average every minute while the benchmark runs (the CPU is
    shared: what else ran beside it shows here)."""

    def __init__(self, every: float = 60.0) -> None:
        self.every = every
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(
                {"at": time.strftime("%H:%M:%S", time.gmtime()), "load": os.getloadavg()[0]}
            )
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def facts(sampler: LoadSampler, started: str) -> dict[str, Any]:
    """When and on what the run was made, and the load beside it."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    loads = [s["load"] for s in sampler.samples]
    return {
        "started_at": started,
        "ended_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "commit": commit or "?",
        "load_samples": sampler.samples,
        "load_min": min(loads, default=None),
        "load_max": max(loads, default=None),
    }
