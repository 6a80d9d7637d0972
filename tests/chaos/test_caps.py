"""`max_instances` under kills: the attempts running at once, sampled at every start and end in
the ledger, never exceed the cap, and no slot leaks (every delivery still runs to success)."""

from __future__ import annotations

import random
import time
from pathlib import Path

from tests.chaos.harness import Profile, Workers, produce, unsettled, verdict, wait_for

CAP = 2  # chaos_app.capped


def test_max_instances_holds_through_kills_and_no_slot_leaks(
    chaos_store: str, folder: Path, profile: Profile
) -> None:
    rng = random.Random(7)
    workers = Workers(chaos_store, folder, processes=2, concurrency=4)
    producer = produce(chaos_store, folder, "capped", "capped", profile.events // 5)
    try:
        for _ in range(profile.kills):
            time.sleep(rng.uniform(0.5, 2.0))
            workers.kill_at_random(rng)
        assert producer.wait(600) == 0
        wait_for("every delivery to settle", lambda: unsettled(chaos_store) == 0, 300, workers.log)
    finally:
        workers.stop()
    report = verdict(chaos_store, folder)
    print(f"\n[chaos] caps: {report.summary()}")
    assert report.ok, report.summary()
    assert 1 <= report.most_at_once["capped"] <= CAP
