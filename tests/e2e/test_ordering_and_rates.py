"""Ordering and rate limits across real `oncefire worker` processes, on both stores.

The ledger each function writes (tests/e2e/apps/ordered.py) is what the system did: the
test checks the order per key in it, and measures the rate of starts from its times.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncefire import App

pytestmark = pytest.mark.e2e

ONCEFIRE = str(Path(sys.executable).parent / "oncefire")
APP = Path(__file__).parent / "apps" / "ordered.py"
DEADLINE = 60.0
SLOTS = "2"  # at a time per process; the ordering tests lease no more: the keys spread
TWO_EACH = ("--concurrency", SLOTS)


class Workers:
    """`oncefire worker APP --processes N` on a store, and the ledger its functions write."""

    def __init__(self, tmp: Path, store_url: str, processes: int, **settings: str) -> None:
        self.ledger = tmp / "ledger"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
        env.update(ONCEFIRE_STORE=store_url, E2E_DIR=str(tmp), ONCEFIRE_SWEEP_EVERY="0.5")
        env.update({f"ONCEFIRE_{name.upper()}": value for name, value in settings.items()})
        self.log_path = tmp / "worker.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [ONCEFIRE, "worker", str(APP), "--processes", str(processes), *TWO_EACH],
                env=env,
                cwd=tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.app = App(store_url)
        self.wait_for(f"{processes} workers", lambda: self.log().count(" serving ") >= processes)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def lines(self) -> list[list[str]]:
        return [line.split() for line in self.ledger.read_text().splitlines()]

    def wait_for(self, what: str, check: object) -> None:
        deadline = time.monotonic() + DEADLINE
        while not check():  # type: ignore[operator]
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}\n{self.log()[-3000:]}")
            time.sleep(0.05)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.app.close()


def ledger_count(w: Workers, word: str) -> int:
    return w.ledger.read_text().count(word) if w.ledger.exists() else 0


@pytest.fixture
def workers(tmp_path: Path, store_url: str) -> Iterator[type[Workers]]:
    started: list[Workers] = []

    def start(processes: int, **settings: str) -> Workers:
        w = Workers(tmp_path, store_url, processes, **settings)
        started.append(w)
        return w

    yield start  # type: ignore[misc]
    for w in started:
        w.close()


@pytest.mark.slow
def test_three_processes_keep_the_order_of_each_key_and_a_failure_holds_back_its_key_only(
    workers: object,
) -> None:
    w: Workers = workers(3, batch_size=SLOTS)  # type: ignore[operator]
    # One commit (each set still its own event, in order). A process leases no more than its
    # two slots and each key's first event holds its slot half a second (apps/ordered.py): the
    # five keys cannot all go to one process, however fast it wakes, so the test always spans
    # processes.
    with w.app.db.transaction() as tx:
        for n in range(20):
            for k in range(5):
                tx.set(w.app.db.document(f"keys/k{k}"), {"n": n})
    w.wait_for("100 events run", lambda: ledger_count(w, "end ") == 100)
    lines = w.lines()
    pids = set()
    for k in range(5):
        mine = [line for line in lines if line[1] == f"k{k}"]
        # One at a time, in event order: start n, end n (or fail n), start n + 1 ...
        expected = []
        for n in range(20):
            if k == 0 and n == 3:
                expected += [["start", "k0", "3"], ["fail", "k0", "3"]]
            expected += [["start", f"k{k}", str(n)], ["end", f"k{k}", str(n)]]
        assert [line[:3] for line in mine] == expected
        pids |= {line[3] for line in mine if line[0] == "start"}
    assert len(pids) > 1, "the events ran in one process only: nothing was tested"
    # While k0's event 3 waited for its retry, the other keys went on.
    failed = lines.index(["fail", "k0", "3"])
    retried = next(
        i for i, line in enumerate(lines) if line[:3] == ["start", "k0", "3"] and i > failed
    )
    between = lines[failed + 1 : retried]
    assert any(line[0] == "start" and line[1] != "k0" for line in between)
    assert not any(line[1] == "k0" for line in between)


@pytest.mark.slow
def test_four_processes_start_a_rate_limited_function_at_its_rate(workers: object) -> None:
    w: Workers = workers(4)  # type: ignore[operator]
    with w.app.db.transaction() as tx:
        for n in range(800):
            tx.set(w.app.db.document(f"mail/m{n}"), {"n": n})
    w.wait_for("13 s of sends", lambda: ledger_count(w, "send ") >= 650)
    times = sorted(float(line[1]) for line in w.lines() if line[0] == "send")
    # Measured over 10 s from the third second on: the start-up and the burst are left out, as
    # are the starts of the first two seconds' tokens that a loaded machine ran late (a time is
    # noted when the function starts, after its token was taken with its batch's lease).
    start = times[0] + 2
    window = [t for t in times if start <= t < start + 10]
    per_second = [sum(1 for t in window if start + s <= t < start + s + 1) for s in range(10)]
    assert 450 <= len(window) <= 550, f"{len(window)} starts in 10 s at 50/s: {per_second}"
    assert max(per_second) <= 50 + 5, per_second  # the rate plus a burst of a tenth
