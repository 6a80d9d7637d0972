"""An app for the ordering and rate-limit e2e tests: each start and end is appended to a
ledger file (one write each, O_APPEND, so lines from several processes never mix)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from oncefire import App, RetryPolicy
from oncefire.events import Event

app = App()
LEDGER = Path(os.environ["E2E_DIR"]) / "ledger"


def note(line: str) -> None:
    """Append one line to the ledger."""
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def hold(n: int) -> None:
    """Long enough for another process to overlap an event, were it let; a key's first event
    holds its slot half a second, so that the processes that lease no more than their slots
    (the tests run them so) cannot take every key's first event in one process."""
    time.sleep(0.5 if n == 0 else 0.01)


@app.on_document_written(
    "keys/{k}", ordering="document", retry_policy=RetryPolicy(first_delay=2, max_attempts=3)
)
def in_order(event: Event) -> None:
    """Runs each key's events one at a time; key k0's event 3 fails at its first attempt."""
    key, n = event.params["k"], event.data.after.to_dict()["n"]
    note(f"start {key} {n} {os.getpid()}")
    if key == "k0" and n == 3 and event.attempt == 1:
        note(f"fail {key} {n}")
        raise ValueError("k0's event 3 fails once")
    hold(n)
    note(f"end {key} {n}")


@app.on_document_created("mail/{m}", rate_limit="50/s")
def send(event: Event) -> None:
    """Rate-limited: notes the wall-clock time it started."""
    note(f"send {time.time():.6f}")


@app.on_document_created(
    "orders/{o}",
    ordering_key=lambda event: event.data.get("customer"),
    retry_policy=RetryPolicy(first_delay=2, max_attempts=3),
)
def by_customer(event: Event) -> None:
    """Runs each customer's orders (one document each) one at a time; customer c0's order 3
    fails at its first attempt."""
    customer, n = event.data.get("customer"), event.data.get("n")
    note(f"kbegin {customer} {n} {os.getpid()}")
    if customer == "c0" and n == 3 and event.attempt == 1:
        note(f"kfail {customer} {n}")
        raise ValueError("c0's order 3 fails once")
    hold(n)
    note(f"kdone {customer} {n}")
