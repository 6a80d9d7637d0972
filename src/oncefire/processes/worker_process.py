"""One worker process of `oncefire worker`, started by the supervisor as `python -m
oncefire.processes.supervisor APP --parent PID`: it loads the app and serves until told
to stop, and it dies with its supervisor.

Until its worker exists (the app still loading) a SIGTERM or SIGINT ends it at once: nothing
is leased yet. After, either makes the worker stop leasing and shut down within its grace.
A supervisor that dies, even by SIGKILL, sends it SIGTERM (Linux's parent-death signal); on
every system the process also checks each PARENT_CHECK that its parent is the supervisor.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys
import threading
from dataclasses import replace
from typing import Any, NoReturn

from oncefire.engine.worker import Worker
from oncefire.loader import load_app

log = logging.getLogger("oncefire.processes.supervisor")

EXIT_STUCK = 3  # a child ended itself over an attempt it could not stop
EXIT_CONFIG = 78  # EX_CONFIG: a child could not load the app, so restarting it will not help
PARENT_CHECK = 1.0  # how often a child checks that its supervisor is still alive
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
# A child lets its attempts finish within the grace less this (at most half the grace), so
# that it is done before its supervisor, at the grace, kills what is left.
STOP_MARGIN = 1.0


def run_child(target: str, concurrency: int | None, parent: int) -> NoReturn:
    """The body of one worker process: serve until told to stop, then exit at once."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_at_once)
    die_with_parent(parent)
    holder: list[Worker] = []  # the worker, once it exists (_watch_parent reads it)
    threading.Thread(
        target=_watch_parent, args=(holder, parent), name="oncefire-parent", daemon=True
    ).start()
    if concurrency is not None:  # also sizes the app's PostgreSQL pool to match
        os.environ["ONCEFIRE_CONCURRENCY"] = str(concurrency)
    try:
        rt = load_app(target).runtime
        grace = rt.settings.shutdown_grace
        rt.settings = replace(rt.settings, shutdown_grace=grace - min(STOP_MARGIN, grace / 2))
        worker = Worker(rt, concurrency=concurrency, is_process=True)
    except Exception:
        log.exception("cannot load %s", target)
        _exit(EXIT_CONFIG)

    def request_stop(signum: int, _frame: Any) -> None:
        worker.stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    holder.append(worker)
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


def die_with_parent(parent: int) -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux), and exit now if the process
    `parent` is no longer the parent (it died before we asked)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # _watch_parent still notices, within PARENT_CHECK
    if os.getppid() != parent:
        os._exit(0)


def _exit_at_once(signum: int, _frame: Any) -> None:
    # Before the worker exists nothing is leased: stop without finishing the app's import.
    os._exit(0)


def _watch_parent(holder: list[Worker], parent: int) -> None:
    """Stop the worker (the process, before the worker exists) once the supervisor is gone."""
    pause = threading.Event()
    while os.getppid() == parent:
        if holder and holder[0].stop_requested.is_set():
            return
        pause.wait(PARENT_CHECK)
    if not holder:
        os._exit(0)  # still loading the app: nothing to release
    log.error("the supervisor of worker %s is gone: stopping", holder[0].name)
    holder[0].stop_requested.set()


def _exit(code: int) -> NoReturn:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point of a worker process (started by the supervisor, not by hand)."""
    parser = argparse.ArgumentParser(prog="python -m oncefire.processes.supervisor")
    parser.add_argument("target")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--parent", type=int, default=None, help="the supervisor's pid")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s [%(process)d] %(message)s",
        datefmt="%H:%M:%S",
    )
    run_child(args.target, args.concurrency, args.parent or os.getppid())
