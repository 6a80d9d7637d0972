"""What the contract tests that drive a worker's loop by hand share: a worker that leases far
ahead of its slots, its App, and a loop run until a condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from oncefire import App
from oncefire.engine.worker import Worker

WAIT = 10.0  # longest a test waits for another thread before it fails


def learned_worker(app: App, concurrency: int = 1) -> Worker:
    """A worker of an App (a process) that has learned its attempts take 0.1 ms, so it leases
    and marks started far ahead of its slots."""
    worker = Worker(app.runtime, concurrency=concurrency)
    for _ in range(20):
        worker.attempts.learn(0.0001)
    return worker


def app_of(worker: Worker) -> App:
    """The App whose Runtime the worker serves."""
    app = worker.rt.app
    assert isinstance(app, App)
    return app


def turn_until(worker: Worker, what: str, check: Callable[[], bool]) -> None:
    """Run the worker's loop until check() holds."""
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        worker.lease_and_start()
        worker.collect(0.01)
