"""Serve an app: N worker processes, each restarted when it dies, all stopped on SIGTERM.

The supervisor imports the app once (so a mistake is one clear line before anything starts),
then runs each worker as a child `python -m oncefire.supervisor APP`. A child that dies is
started again after a short backoff that grows while it keeps dying young, so a crash loop
does not spin. SIGTERM or SIGINT is passed on to every child, which stops leasing, lets its
attempts finish within the shutdown grace and hands back the rest.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from oncefire.keeper import warn_at_start
from oncefire.loader import load_app
from oncefire.worker import Worker

if TYPE_CHECKING:
    from oncefire.app import App

log = logging.getLogger("oncefire.supervisor")

EXIT_STUCK = 3  # a child ended itself over an attempt it could not stop
EXIT_CONFIG = 78  # EX_CONFIG: a child could not load the app, so restarting it will not help
FIRST_BACKOFF = 0.1
MAX_BACKOFF = 5.0
STABLE_AFTER = 10.0  # a child alive this long has its slot's backoff reset
TEND_EVERY = 0.1  # how often the supervisor looks at its children
KILL_AFTER = 10.0  # past the shutdown grace, a child still alive gets SIGKILL
PARENT_CHECK = 1.0  # how often a child checks that its supervisor is still alive


def serve(
    target: str,
    *,
    store: str | None,
    processes: int,
    concurrency: int | None,
    is_verbose: bool = False,
    alongside: Callable[[App], AbstractContextManager[object]] | None = None,
) -> int:
    """Run the app's workers until SIGTERM or SIGINT; return the exit status. alongside, if
    given, runs something else on the loaded app in this process for as long (the HTTP
    server of `oncefire run`)."""
    if store:
        os.environ["ONCEFIRE_STORE"] = store
    app = load_app(target)
    app.store  # noqa: B018 - create or upgrade the schema once, before the children race to
    warn_at_start(app.runtime)  # once here, not once a worker process
    supervisor = Supervisor(
        target, processes, concurrency, app.settings.shutdown_grace, is_verbose=is_verbose
    )
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
        *,
        is_verbose: bool = False,
    ) -> None:
        self.target = target
        self.slots = [_Slot(i) for i in range(processes)]
        self.concurrency = concurrency
        self.shutdown_grace = shutdown_grace
        self.is_verbose = is_verbose
        self.is_stopping = False
        self.error: str | None = None

    def command(self) -> list[str]:
        """The command line of one worker process."""
        cmd = [sys.executable, "-m", "oncefire.supervisor", self.target]
        if self.concurrency is not None:
            cmd += ["--concurrency", str(self.concurrency)]
        if self.is_verbose:
            cmd.append("--verbose")
        return cmd

    def run(self) -> int:
        """Start the children, keep them alive, and stop them all on SIGTERM or SIGINT."""

        def request_stop(signum: int, _frame: Any) -> None:
            # Only a flag: the loop below notices it within TEND_EVERY.
            self.is_stopping = True

        previous = {s: signal.signal(s, request_stop) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            log.info("supervising %d worker process(es) of %s", len(self.slots), self.target)
            while not self.is_stopping and self.error is None:
                now = time.monotonic()
                for slot in self.slots:
                    self._tend(slot, now)
                time.sleep(TEND_EVERY)
            return self._stop_all()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

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
        live = [s.process for s in self.slots if s.process is not None]
        log.info("stopping %d worker process(es)", len(live))
        for process in live:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.shutdown_grace + KILL_AFTER
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


def run_child(target: str, concurrency: int | None) -> NoReturn:
    """The body of one worker process: serve until told to stop, then exit at once."""
    stop_early: list[int] = []
    handler = signal.signal(signal.SIGTERM, lambda signum, _f: stop_early.append(signum))
    signal.signal(signal.SIGINT, handler)
    if concurrency is not None:  # also sizes the app's PostgreSQL pool to match
        os.environ["ONCEFIRE_CONCURRENCY"] = str(concurrency)
    try:
        worker = Worker(load_app(target).runtime, concurrency=concurrency, is_process=True)
    except Exception:
        log.exception("cannot load %s", target)
        _exit(EXIT_CONFIG)

    def request_stop(signum: int, _frame: Any) -> None:
        worker.stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    if stop_early:
        worker.stop_requested.set()
    threading.Thread(
        target=_watch_parent, args=(worker, os.getppid()), name="oncefire-parent", daemon=True
    ).start()
    code = 0
    try:
        worker.run()
    except Exception:
        log.exception("worker %s failed", worker.name)
        code = 1
    if worker.has_stuck_attempt:
        code = EXIT_STUCK
        # The stuck attempt kept its lease until now: its timeout is recorded (and its retry
        # made due) as the very last step, with thread switches all but stopped, so the stuck
        # thread cannot run beside its retry.
        logging.shutdown()
        sys.setswitchinterval(60.0)
        worker.write_overdue()
    # Threads of attempts that cannot be stopped must not hold up the exit.
    _exit(code)


def _watch_parent(worker: Worker, parent: int) -> None:
    while not worker.stop_requested.wait(PARENT_CHECK):
        if os.getppid() != parent:
            log.error("the supervisor of worker %s is gone: stopping", worker.name)
            worker.stop_requested.set()


def _exit(code: int) -> NoReturn:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point of a worker process (started by the supervisor, not by hand)."""
    parser = argparse.ArgumentParser(prog="python -m oncefire.supervisor")
    parser.add_argument("target")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s [%(process)d] %(message)s",
        datefmt="%H:%M:%S",
    )
    run_child(args.target, args.concurrency)


if __name__ == "__main__":
    main()
