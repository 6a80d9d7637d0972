"""The app the chaos suite's workers serve; every function witnesses itself in the ledger.

The ledger folder comes from $CHAOS_LEDGER, the store from $ONCEFIRE_STORE. A document created
under `items/KEY` starts `record`, which writes one effect document through `tx.claim` (a
committed effect) and one `effect` line (an outside effect, guarded by `@idempotent`); one under
`calls/KEY` starts `call`, which does the same after working a moment (as a call to another
service would), so that a fault often finds it between its lease and its commit.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from oncefire import App, LeaseLostError, RetryPolicy, idempotent
from oncefire.events import Event
from tests.chaos import ledger

app = App()
QUICK = RetryPolicy(max_attempts=30, first_delay=0.2, multiplier=2, max_delay=1)
POISON = RetryPolicy(max_attempts=3, first_delay=0.1, multiplier=1)


def book() -> ledger.Ledger:
    """This process's ledger."""
    return ledger.for_process(os.environ["CHAOS_LEDGER"], "worker")


def witness(kind: str, event: Event, name: str, **fields: Any) -> None:
    """One ledger line about this attempt."""
    book().write(kind, event.params["key"], function=name, attempt=event.attempt, **fields)


def commit_effect(event: Event) -> None:
    """Write this event's effect document exactly once (tx.claim)."""
    with app.db.transaction() as tx:
        if tx.claim(f"effect-{event.id}"):
            tx.set(app.db.collection("effects").document(), {"key": event.params["key"]})


@app.on_document_created("items/{key}", retry_policy=QUICK, timeout=3)
@idempotent(lease=3)
def record(event: Event) -> None:
    """A committed effect and an outside effect per item."""
    witness("start", event, "record")
    commit_effect(event)
    witness("effect", event, "record")
    witness("end", event, "record", ok=True)


@app.on_document_created("calls/{key}", retry_policy=QUICK, timeout=3)
@idempotent(lease=3)
def call(event: Event) -> None:
    """record, after 20 to 200 ms of work before its commit."""
    witness("start", event, "call")
    time.sleep(random.uniform(0.02, 0.2))
    commit_effect(event)
    witness("effect", event, "call")
    witness("end", event, "call", ok=True)


@app.on_document_created("zombies/{key}", retry_policy=QUICK, timeout=60)
def zombie(event: Event) -> None:
    """Its first attempt sleeps 3 s (the test stops its process meanwhile, however loaded the
    machine), then finds its transaction fenced (the lease was taken over: a `fenced` line)
    and fails late; a later attempt of a `slow*` key commits, then runs 6 s more (the late
    failure lands while it runs)."""
    witness("start", event, "zombie")
    if event.attempt == 1:
        time.sleep(3.0)
        try:
            commit_effect(event)  # after the rescue took it over: fenced, writes nothing
        except LeaseLostError:
            witness("fenced", event, "zombie")
        witness("end", event, "zombie", ok=False)
        raise RuntimeError("late failure of a stalled attempt")
    commit_effect(event)
    if event.params["key"].startswith("slow"):
        time.sleep(6.0)
    witness("end", event, "zombie", ok=True)


@app.on_document_created("capped/{key}", retry_policy=QUICK, max_instances=2)
def capped(event: Event) -> None:
    """Runs a little while, at most two at once across every worker."""
    witness("start", event, "capped")
    time.sleep(random.uniform(0.01, 0.08))
    witness("end", event, "capped", ok=True)


@app.on_document_created("poison/{key}", retry_policy=POISON, timeout=1)
def poison(event: Event) -> None:
    """Fails by its key: raise-*, exit-* (ends its process), hang-* (past the timeout)."""
    key = event.params["key"]
    witness("start", event, "poison")
    if key.startswith("exit-"):
        os._exit(1)
    if key.startswith("hang-"):
        time.sleep(30)
    if key.startswith("ok-"):
        witness("end", event, "poison", ok=True)
        return
    witness("end", event, "poison", ok=False)
    raise ValueError(f"poison {key}")
