"""A worker stopped (SIGSTOP) past its lease, then resumed (SIGCONT): its attempt was rescued
and run elsewhere; its late results change nothing (fenced by the lease token: its late
transaction raises LeaseLostError, its late ending is discarded), whether they land after the
rescuer ended or while it still runs."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.chaos import ledger
from tests.chaos.harness import (
    FULL,
    Profile,
    Workers,
    outcomes,
    produce,
    unsettled,
    verdict,
    wait_for,
)
from tests.stopping import stop_outside_a_write


def first(folder: Path, kind: str, attempt: int) -> ledger.Entry | None:
    """The first line of a kind for an attempt number of the zombie function."""
    entries = ledger.read(folder)
    return next((e for e in entries if e.kind == kind and e.get("attempt") == attempt), None)


@pytest.mark.parametrize(
    ("prefix", "resume_after"),
    [("k", "end"), ("slow", "start")],
    ids=["after_the_rescuer_ended", "while_the_rescuer_runs"],
)
def test_a_stopped_worker_resumed_past_its_lease_changes_nothing(
    chaos_store: str, folder: Path, prefix: str, resume_after: str, profile: Profile
) -> None:
    if resume_after == "end" and profile is not FULL:
        pytest.skip("the full profile's: the quick one resumes the worker while its rescuer runs")
    workers = Workers(chaos_store, folder, processes=2, concurrency=2)
    try:
        assert produce(chaos_store, folder, "zombies", "zombie", 1, prefix=prefix).wait(60) == 0
        started = wait_for("attempt 1", lambda: first(folder, "start", 1), 60, workers.log)
        stop_outside_a_write(chaos_store, started.pid)  # within the attempt's 3 s sleep
        try:
            assert first(folder, "end", 1) is None, "attempt 1 ended before it was stopped"
            # The rescuer: attempt 2 in another process ("slow" keys run 6 s after it commits).
            rescued = wait_for(
                "the rescue", lambda: first(folder, resume_after, 2), 60, workers.log
            )
        finally:
            os.kill(started.pid, signal.SIGCONT)
        assert rescued.pid != started.pid
        late = wait_for(
            "the late failure", lambda: first(folder, "end", 1), 60, workers.log, chaos_store
        )
        assert late.pid == started.pid
        # Its late transaction found the lease taken over and wrote nothing (fencing.py).
        assert first(folder, "fenced", 1) is not None
        wait_for("the delivery to settle", lambda: unsettled(chaos_store) == 0, 60, workers.log)
        end = first(folder, "end", 2)
        assert end is not None and end.get("ok")
        if resume_after == "start":
            # Ordered in the ledger: the late failure landed while the rescuer still ran.
            entries = ledger.read(folder)
            assert entries.index(late) < entries.index(end), "the rescuer ended first"
    finally:
        assert workers.stop() == 0  # SIGTERM: the zombie records (tries to) what it holds
    report = verdict(chaos_store, folder)
    assert report.ok, report.summary()
    key = f"{prefix}000000"
    starts = report.starts[("zombie", key)]
    assert starts == 2, f"{starts} runs: a late result of the stopped worker changed the state"
    attempts = outcomes(chaos_store, "zombie")
    assert attempts["succeeded"] == 1 and "failed" not in attempts, attempts
    assert sum(attempts.values()) == 2, attempts
