"""Serve an app: N worker processes, each restarted when it dies, all stopped on SIGTERM.

The app is imported once first (a mistake is one clear line before anything starts); each
worker is a child `python -m oncefire.processes.supervisor APP` (worker_process.py), started
again after a backoff that grows while it keeps dying young. SIGTERM or SIGINT, at any moment,
is passed on to every child (which releases what it has not started and lets its attempts
finish); what is left after the shutdown grace is killed. A child whose supervisor died exits.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncefire.engine.routing import warn_at_start
from oncefire.errors import ConfigError
from oncefire.loader import load_app
from oncefire.processes import worker_process
from oncefire.processes.worker_process import EXIT_CONFIG, EXIT_STUCK

if TYPE_CHECKING:
    from oncefire.app import App

log = logging.getLogger("oncefire.processes.supervisor")

FIRST_BACKOFF = 0.1
MAX_BACKOFF = 5.0
STABLE_AFTER = 10.0  # a child alive this long has its slot's backoff reset
TEND_EVERY = 0.1  # how often the supervisor looks at its children
PROCESSES_PER_CPU = 4  # more worker processes than this a CPU are refused unless forced


def cpu_count() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_processes(processes: int, *, is_forced: bool = False) -> None:
    """Refuse fewer than 1 worker process, or more than 4 a CPU unless forced."""
    if processes < 1:
        raise ConfigError(f"--processes {processes}: give at least 1.")
    cpus = cpu_count()
    most = PROCESSES_PER_CPU * cpus
    if processes > most and not is_forced:
        raise ConfigError(
            f"--processes {processes} is more than {PROCESSES_PER_CPU} a CPU ({most} for "
            f"{cpus} CPU(s)): more processes only contend for the CPUs, and each runs "
            "--concurrency attempts at once; pass --force to start them anyway."
        )


class StopRequested(BaseException):
    """SIGTERM or SIGINT came while the app was loading: there is nothing to stop yet."""


class StopSignals:
    """SIGTERM and SIGINT caught while the block runs: each sets is_stopping. While
    is_loading (the app imported, the schema upgraded) a signal also interrupts the load with
    StopRequested, which ends the block quietly."""

    def __init__(self) -> None:
        self.is_stopping = False
        self.is_loading = True
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._request_stop)
        return self

    def __exit__(self, error_type: type[BaseException] | None, *_: object) -> bool:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if error_type is not None and issubclass(error_type, StopRequested):
            log.info("stopped while loading the app: no worker process was started")
            return True
        return False

    def _request_stop(self, signum: int, _frame: Any) -> None:
        # Only a flag once loaded: the supervisor's loop reads it within TEND_EVERY.
        self.is_stopping = True
        if self.is_loading:
            self.is_loading = False
            raise StopRequested


def serve(
    target: str,
    *,
    store: str | None,
    processes: int,
    concurrency: int | None,
    signals: StopSignals,
    is_verbose: bool = False,
    alongside: Callable[[App], AbstractContextManager[object]] | None = None,
) -> int:
    """Run the app's workers until SIGTERM or SIGINT (caught by signals, entered before the
    app was first loaded); return the exit status. alongside, if given, runs something else
    on the loaded app in this process for as long (the HTTP server of `oncefire run`)."""
    if store:
        os.environ["ONCEFIRE_STORE"] = store
    app = load_app(target)
    app.store  # noqa: B018 - create or upgrade the schema once, before the children race to
    signals.is_loading = False
    warn_at_start(app.runtime)  # once here, not once a worker process
    grace = app.settings.shutdown_grace
    supervisor = Supervisor(target, processes, concurrency, grace, signals, is_verbose=is_verbose)
    if alongside is None:
        app.close()
        return supervisor.run()
    try:
        with alongside(app):
            return supervisor.run()
    finally:
        app.close()


@dataclass(slots=True)
class _Slot:
    index: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float = 0.0
    backoff: float = FIRST_BACKOFF


class Supervisor:
    """Keeps N worker processes of an app alive until asked to stop."""

    def __init__(
        self,
        target: str,
        processes: int,
        concurrency: int | None,
        shutdown_grace: float,
        signals: StopSignals,
        *,
        is_verbose: bool = False,
    ) -> None:
        self.target = target
        self.slots = [_Slot(i) for i in range(processes)]
        self.concurrency = concurrency
        self.shutdown_grace = shutdown_grace
        self.signals = signals
        self.is_verbose = is_verbose
        self.error: str | None = None

    def command(self) -> list[str]:
        """The command line of one worker process."""
        cmd = [sys.executable, "-m", "oncefire.processes.supervisor", self.target]
        cmd += ["--parent", str(os.getpid())]
        if self.concurrency is not None:
            cmd += ["--concurrency", str(self.concurrency)]
        if self.is_verbose:
            cmd.append("--verbose")
        return cmd

    def run(self) -> int:
        """Start the children, keep them alive, and stop them all on SIGTERM or SIGINT."""
        log.info("supervising %d worker process(es) of %s", len(self.slots), self.target)
        while not self.signals.is_stopping and self.error is None:
            now = time.monotonic()
            for slot in self.slots:
                if self.signals.is_stopping:
                    break  # no child is started once a signal came
                self._tend(slot, now)
            time.sleep(TEND_EVERY)
        return self._stop_all()

    def _tend(self, slot: _Slot, now: float) -> None:
        if slot.process is not None:
            code = slot.process.poll()
            if code is None:
                if now - slot.started_at >= STABLE_AFTER:
                    slot.backoff = FIRST_BACKOFF
                return
            pid = slot.process.pid
            slot.process = None
            if code == EXIT_CONFIG:
                self.error = f"worker process {pid} could not load {self.target}"
                log.error("%s: stopping", self.error)
                return
            if code == EXIT_STUCK:
                slot.restart_at = now  # a deliberate exit: replace it at once
            else:
                slot.restart_at = now + slot.backoff
                slot.backoff = min(slot.backoff * 2, MAX_BACKOFF)
            log.warning(
                "worker process %d %s; starting another in %.1f s",
                pid,
                describe_exit(code),
                slot.restart_at - now,
            )
        if now >= slot.restart_at:
            slot.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL)
            slot.started_at = now
            log.info("started worker process %d", slot.process.pid)

    def _stop_all(self) -> int:
        """SIGTERM to every child; SIGKILL to those still alive at the shutdown grace (they
        stop by themselves a little before it: worker_process.STOP_MARGIN)."""
        deadline = time.monotonic() + self.shutdown_grace
        live = [s.process for s in self.slots if s.process is not None]
        log.info("stopping %d worker process(es)", len(live))
        for process in live:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        while any(p.poll() is None for p in live) and time.monotonic() < deadline:
            time.sleep(0.05)
        is_forced = False
        for process in live:
            if process.poll() is None:
                log.error("worker process %d did not stop in time: killing it", process.pid)
                process.kill()
                process.wait()
                is_forced = True
        log.info("all worker processes stopped")
        return 1 if self.error is not None or is_forced else 0


def describe_exit(code: int) -> str:
    """How a child ended, in words."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    if code == EXIT_STUCK:
        return "ended itself after an attempt it could not stop"
    return f"exited with status {code}"


if __name__ == "__main__":  # a worker process, started by the supervisor
    worker_process.main()
