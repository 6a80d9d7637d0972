"""Functions that misbehave on purpose, served by real `oncefire worker` processes in tests.

Each function leaves a mark in $E2E_DIR when an attempt starts (`start-EVENT-ATTEMPT`, holding
the pid), so a test knows which process to kill, stop or wait for.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from oncefire import App, RetryPolicy, idempotent
from oncefire.events import Event

app = App()
QUICK = RetryPolicy(first_delay=0.1, multiplier=1.0)


def mark(event: Event, what: str = "start") -> None:
    """Record that this attempt reached `what`, with the pid of its process."""
    path = Path(os.environ["E2E_DIR"]) / f"{what}-{event.id}-{event.attempt}"
    path.write_text(str(os.getpid()))


@app.on_message("slow", retry_policy=QUICK, timeout=60)
def slow(event: Event) -> None:
    """Sleeps data['sleep'] seconds on its first attempt, then succeeds."""
    mark(event)
    if event.attempt == 1:
        time.sleep(event.data.data.get("sleep", 0))
    mark(event, "end")


@app.on_message("hang", retry_policy=QUICK, timeout=1)
def hang(event: Event) -> None:
    """A plain function that hangs past its timeout on its first attempt."""
    mark(event)
    if event.attempt == 1:
        time.sleep(120)


@app.on_message("hang-async", retry_policy=QUICK, timeout=1)
async def hang_async(event: Event) -> None:
    """An async function that hangs past its timeout on its first attempt."""
    mark(event)
    if event.attempt == 1:
        await asyncio.sleep(120)


@app.on_message("poison", retry_policy=QUICK)
def poison(event: Event) -> None:
    """Kills its own process, every time."""
    mark(event)
    os._exit(1)


@app.on_message("capped", retry_policy=QUICK, max_instances=2)
def capped(event: Event) -> None:
    """Runs for a while, with a file in $E2E_DIR/running for as long as it runs."""
    mark(event)
    running = Path(os.environ["E2E_DIR"]) / "running" / f"{os.getpid()}-{event.id}"
    running.touch()
    try:
        time.sleep(0.5)
    finally:
        running.unlink()


@app.on_message("zombie", retry_policy=QUICK, timeout=60)
def zombie(event: Event) -> None:
    """Its first attempt fails late (a stalled process's write that must change nothing)."""
    mark(event)
    if event.attempt == 1:
        time.sleep(event.data.data.get("sleep", 0))
        mark(event, "end")
        raise RuntimeError("late failure of attempt 1")


def ledger(event: Event, what: str) -> None:
    """Append `what pid attempt time` to $E2E_DIR/ledger: when each attempt ran, and where."""
    line = f"{what} {os.getpid()} {event.attempt} {time.time():.6f}\n"
    with open(Path(os.environ["E2E_DIR"]) / "ledger", "a") as file:
        file.write(line)


@idempotent(lease=1)
def pay(event: Event) -> str:
    """An outside effect, once per event: a line in $E2E_DIR/effects. Overruns on attempt 1."""
    if event.attempt == 1:
        time.sleep(event.data.data.get("sleep", 0))
    with open(Path(os.environ["E2E_DIR"]) / "effects", "a") as file:
        file.write(f"{event.id}\n")
    return "paid"


@app.on_message("overrun", retry_policy=QUICK, timeout=1, max_instances=1)
def overrun(event: Event) -> None:
    """Runs past its timeout on its first attempt (a plain thread cannot be stopped)."""
    ledger(event, "start")
    mark(event)
    try:
        pay(event)
    finally:
        ledger(event, "end")
