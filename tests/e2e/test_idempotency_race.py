"""Eight processes deliver the same event at the same moment on one SQLite file.

Each process registers two functions on the event: `charge` (@idempotent, its side effect
a line appended to a file outside the store) and `count` (tx.claim, its side effect a
counter document). Exactly one line and a counter of 1 must come out, and once the
winner's lease has passed every retried delivery settles without another side effect.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

from oncefire import App
from oncefire.testing import TestClock, make_event

PROCESSES = 8
LEASE = 60.0

RACE_APP = textwrap.dedent(
    """
    import os
    import sys
    import time

    from oncefire import App, Increment, idempotent
    from oncefire.testing import deliver, make_event


    def refused(app, event_id):
        attempts = app.store.attempts(event_id)
        return sum(a["function"] == "charge" and a["outcome"] == "failed" for a in attempts)


    def build(store, effects, clock=None):
        app = App(store, clock=clock)

        @app.on_message("payments", timeout=60, name="charge")
        @idempotent(lease=60)
        def charge(event):
            # A slow payment API: it answers once the other seven have tried the key (or
            # after 30 s), so every other delivery meets the key while it is held.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and refused(app, event.id) < 7:
                time.sleep(0.01)
            with open(effects, "a") as out:
                out.write(f"{os.getpid()}\\n")
            return "ch_1"

        @app.on_message("payments", name="count")
        def count(event):
            with app.db.transaction() as tx:
                if tx.claim(event.id):
                    tx.set(app.db.document("stats/payments"), {"n": Increment(1)}, merge=True)

        return app


    if __name__ == "__main__":
        store, effects, event_id, event_time = sys.argv[1:5]
        app = build(store, effects)
        event = make_event(
            "message.published", "payments", {"amount": 5}, id=event_id, time=float(event_time)
        )
        app.store  # opened before the start signal, so all race to the claim itself
        print("ready", flush=True)
        sys.stdin.readline()
        charged = deliver(app, "charge", event, times=1)  # each process: one delivery
        counted = deliver(app, "count", event, times=1)
        print(dict(charged.outcomes), dict(counted.outcomes), flush=True)
        app.close()
    """
)


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("race_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.e2e
def test_eight_processes_racing_on_one_key_make_one_side_effect(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/race.db"
    effects = tmp_path / "effects.txt"
    script = tmp_path / "race_app.py"
    script.write_text(RACE_APP)
    now = time.time()
    event = make_event("message.published", "payments", {"amount": 5}, time=now)
    App(store).store.close()  # create and migrate the file once, before the race

    children = [
        subprocess.Popen(
            [sys.executable, str(script), store, str(effects), event.id, repr(now)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready", child.stderr
        for child in children:  # the start signal, as close together as pipes allow
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=120) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    for child, (out, err) in zip(children, results, strict=True):
        assert child.returncode == 0, err
        assert out.strip(), err

    assert len(effects.read_text().splitlines()) == 1, "exactly one charge"
    held = sum("'failed'" in out.split("}")[0] for out, _ in results)
    assert held == PROCESSES - 1, "the other seven must find the key held, not claim it"

    # The losers that found the key held were told to retry after the winner's lease.
    after_lease = TestClock(time.time() + LEASE + 1)
    later = load(script).build(store, str(effects), clock=after_lease)
    try:
        later.drain()
        states = later.store.delivery_states(event.id)
        assert sorted(f for f, _, _ in states) == ["charge"] * 8 + ["count"] * 8
        assert {state for _, state, _ in states} == {"succeeded"}
        assert len(effects.read_text().splitlines()) == 1, "still exactly one charge"
        assert later.db.document("stats/payments").get().get("n") == 1
        hits = later.stats(window=10 * LEASE)
        assert hits["charge"].dedupe_hits == 7
        assert hits["count"].dedupe_hits == 7
    finally:
        later.close()
