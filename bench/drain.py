"""Drains of a backlog by oncefire's workers, in a set-up of processes and settings, with
the commits they made; and the end-to-end run of one producer with warm workers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import workload
from benchlib import log, phase, time_drain, time_window, wait_until
from commits import PostgresCommits, WalCommits, per_event
from oncefire_harness import (
    WORKER_PROCESSES,
    Backlog,
    Target,
    backlog_store,
    prefill,
    reset,
    workers,
    write_each,
)

from oncefire.settings import Settings


@dataclass(frozen=True, slots=True)
class Setup:
    """How the worker processes of a drain run: how many, and settings in their environment."""

    name: str
    processes: int
    settings: tuple[tuple[str, str], ...] = ()  # (setting, value) as ONCEFIRE_* variables

    @property
    def env(self) -> dict[str, str]:
        return {f"ONCEFIRE_{k.upper()}": v for k, v in self.settings}

    @property
    def label(self) -> str:
        """Its processes, threads and batch size, the defaults read from oncefire.settings."""
        defaults = Settings()
        given = dict(self.settings)
        threads = int(given.get("concurrency", defaults.concurrency))
        batch = int(given.get("batch_size", defaults.batch_size))
        return (
            f"{self.processes} processes x {threads} thread{'s' if threads > 1 else ''}, "
            f"batch_size {batch}"
        )

    @property
    def slots(self) -> int:
        given = dict(self.settings)
        return self.processes * int(given.get("concurrency", Settings().concurrency))


DEFAULTS = Setup("defaults", WORKER_PROCESSES)
# Per-event acknowledgement: one slot a process and batches of one, so each attempt's record
# is committed on its own (with the claim of the next one), on as many slots as the
# defaults have.
PER_EVENT = Setup(
    "per_event",
    WORKER_PROCESSES * Settings().concurrency,
    (("concurrency", "1"), ("batch_size", "1")),
)


def drain_only(
    t: Target,
    function: str,
    n: int,
    max_seconds: float,
    *,
    window: float | None = None,
    setup: Setup = DEFAULTS,
) -> dict[str, Any]:
    """A backlog of n events with no worker running; start the workers, time the drain."""
    with phase(f"the backlog of {n:,} in place"):
        backlog_store(t, function, n)
    return drain_backlog(t, function, n, max_seconds, window=window, setup=setup)


def drain_backlog(
    t: Target,
    function: str,
    n: int,
    max_seconds: float,
    *,
    window: float | None = None,
    setup: Setup = DEFAULTS,
) -> dict[str, Any]:
    """Start the workers on a backlog of n events; time its drain (or a window of it); stop
    them. The commits the workers made, from their start to their stop, per event done."""
    counter: WalCommits | PostgresCommits = (
        WalCommits(t.path) if t.path is not None else PostgresCommits(t.url.rsplit("/", 1)[1])
    )
    backlog = Backlog(t, function)
    remaining = backlog.ended_counter()  # on SQLite it opens the WAL index, kept open
    before = counter.read()
    try:
        with (
            phase(f"start workers ({setup.name}), drain, stop workers"),
            workers(
                t,
                function,
                extra_env={**setup.env, **counter.env},
                processes=setup.processes,
                first_path=counter.path,
            ) as process,
        ):
            remaining = alive(process, remaining)
            if window is None:
                result = time_drain(remaining, n, warmup=max(1, n // 40), max_seconds=max_seconds)
            else:
                warmup = max(1, n // 40)
                result = time_window(remaining, backlog.has_work, n, warmup=warmup, window=window)
        after = counter.settled()
    finally:
        backlog.close()
    own = backlog.queries if t.kind == "postgres" else 0
    check = Backlog(t, function)
    try:
        done = n - check()
    finally:
        check.close()
    result["commits_per_event"] = per_event(before, after, own, done)
    result["events_done_by_stop"] = done
    return result


def alive(process: Any, remaining: Callable[[], int]) -> Callable[[], int]:
    """remaining(), failing at once when the worker processes have exited (a refused
    option, a crash) instead of waiting out the start-up timeout."""

    def count() -> int:
        if process.poll() is not None:
            raise RuntimeError(f"the worker processes exited with status {process.returncode}")
        return remaining()

    return count


def end_to_end(
    t: Target, function: str, n: int, max_seconds: float, warmup: int = 200
) -> dict[str, Any]:
    """Warm workers; one producer writes n documents one by one; time until all ran."""
    reset(t)
    app = workload.build(t.url, function)
    app.store  # noqa: B018 - create the schema before the workers start
    backlog = Backlog(t, function)
    try:
        with workers(t, function):
            warmup = min(warmup, max(1, n // 2))
            prefill(app, warmup, prefix="w")
            wait_until(lambda: backlog() == 0, 120, "the warm-up events to drain")
            time.sleep(0.3)
            t0 = time.monotonic()
            written, write_seconds = write_each(app, n, "e", max_seconds)
            result = time_drain(backlog, written, warmup=0, max_seconds=max_seconds, started=t0)
    finally:
        backlog.close()
        app.close()
    result["written"] = written
    result["write_rate"] = written / write_seconds
    result["capped"] = result["capped"] or written < n
    return result


def describe_run(label: str, result: dict[str, Any]) -> None:
    """One progress line for a measured run."""
    rate = result.get("rate")
    shown = f"{rate:,.0f}/s" if rate else "n/a"
    capped = " (cut short)" if result.get("capped") else ""
    if result.get("short"):
        capped = f" (the backlog ran out after {result['seconds']:.1f} s of the window)"
    commits = result.get("commits_per_event")
    said = f", {commits:.3f} commits/event" if commits is not None else ""
    log(f"  {label}: {shown}{capped}{said}")
