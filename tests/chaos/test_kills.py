"""Workers SIGKILLed at random moments while another process writes: nothing acknowledged is
lost, every committed effect happens once, every repeated outside effect follows a kill."""

from __future__ import annotations

import itertools
import random
import time
from pathlib import Path

from tests.chaos import ledger
from tests.chaos.harness import (
    Profile,
    Workers,
    outcomes,
    produce,
    rows,
    unsettled,
    verdict,
    wait_for,
)

SEED = 13


def longest_stall(folder: Path) -> float:
    """The longest gap, in seconds, between two successive ends of attempts."""
    ends = [e.at for e in ledger.read(folder) if e.kind == "end"]
    return max((b - a for a, b in itertools.pairwise(ends)), default=0) / 1e9


def test_random_worker_kills_lose_nothing_and_repeat_no_effect(
    chaos_store: str, folder: Path, profile: Profile
) -> None:
    rng = random.Random(SEED)
    workers = Workers(chaos_store, folder, processes=2)
    began = time.monotonic()
    producer = produce(chaos_store, folder, "items", "record", profile.events)
    killed = []
    try:
        for _ in range(profile.kills):
            time.sleep(rng.uniform(0.3, 1.5))  # a random moment of the run, not a wait
            killed.append(workers.kill_at_random(rng))
        assert producer.wait(600) == 0
        wait_for("every delivery to settle", lambda: unsettled(chaos_store) == 0, 300, workers.log)
    finally:
        workers.stop()
        if producer.poll() is None:
            producer.kill()
    report = verdict(chaos_store, folder)
    print(
        f"\n[chaos] kills {chaos_store.split(':')[0]}: {profile.events} events, kills {killed}, "
        f"{time.monotonic() - began:.1f} s, attempts {dict(outcomes(chaos_store, 'record'))}, "
        f"longest stall {longest_stall(folder):.1f} s; {report.summary()}"
    )
    assert report.acknowledged == profile.events
    assert report.ok, report.summary()
    assert report.dead == {}


def test_sqlite_survives_whole_group_kills_with_its_integrity(
    tmp_path: Path, folder: Path, profile: Profile
) -> None:
    store = f"sqlite:///{tmp_path}/chaos.db"
    rng = random.Random(SEED)
    producer = produce(store, folder, "items", "record", profile.events // 2)
    workers = Workers(store, folder, processes=2)
    try:
        for _ in range(profile.group_kills):
            time.sleep(rng.uniform(0.2, 1.0))
            workers.kill(workers.pid)  # the supervisor's whole group; started again
            assert rows(store, "PRAGMA integrity_check") == [("ok",)]
        assert producer.wait(600) == 0
        wait_for("every delivery to settle", lambda: unsettled(store) == 0, 300, workers.log)
    finally:
        workers.stop()
        if producer.poll() is None:
            producer.kill()
    assert rows(store, "PRAGMA integrity_check") == [("ok",)]
    report = verdict(store, folder)
    print(f"\n[chaos] group kills x{profile.group_kills}: {report.summary()}")
    assert report.ok, report.summary()
