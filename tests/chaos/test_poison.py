"""A poison mix (raise, os._exit, a hang past the timeout, an undecodable payload) among good
events: each poison lands in the dead letters after exactly its attempts (3), each of them a
run, a process death counted as a crash; an undecodable payload after one attempt (it is a
permanent error); the good events all succeed.

Under kills, a delivery a dead worker had marked started with others (a wave ahead) is handed
back uncharged and runs alone next (issue 11 point 24): a poison may then run more often than
it is charged, but every attempt number charged to it is one the ledger saw start, or one
whose process died before its function's first line (see explained_attempts)."""

from __future__ import annotations

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

ATTEMPTS = 3  # chaos_app.POISON
KINDS = ("raise-", "exit-", "hang-")
# A kill explains an attempt it charged without a run only this soon after the attempt was
# marked started (the mark-to-entry window, plus the wait before the test writes its kill line).
KILL_WINDOW = 1.0


def write_mix(store: str, folder: Path, each: int, undecodable: int) -> None:
    """`each` poisons of every kind, `undecodable` undecodable payloads and 50 good events."""
    for prefix in (*KINDS, "bad-", "ok-"):
        count = 50 if prefix == "ok-" else undecodable if prefix == "bad-" else each
        if count:
            assert produce(store, folder, "poison", "poison", count, prefix=prefix).wait(60) == 0
    # A payload the runtime cannot decode: a datetime tag holding no datetime.
    if store.startswith("sqlite"):
        value = """'{"$time": "no"}'"""
    else:
        value = """'{"$time": "no"}'::jsonb"""
    rows(store, f"UPDATE oncefire_events SET data = {value} WHERE source LIKE 'poison/bad-%'")


def run_mix(
    store: str, folder: Path, each: int, kills: int, undecodable: int = 0, limit: float = 120
) -> None:
    rng = random.Random(3)
    write_mix(store, folder, each, undecodable)
    # Without kills, each worker leases one delivery at a time: a poison that ends its process
    # then holds no other delivery that could be charged for it (issue 11 point 24).
    one = {} if kills else {"ONCEFIRE_BATCH_SIZE": "1"}
    workers = Workers(store, folder, processes=2, concurrency=1 if not kills else 2, **one)
    try:
        for _ in range(kills):
            time.sleep(rng.uniform(0.5, 1.5))
            workers.kill_at_random(rng)
        wait_for("every delivery to settle", lambda: unsettled(store) == 0, limit, workers.log)
    finally:
        workers.stop()
    report = verdict(store, folder)
    print(f"\n[chaos] poison: {dict(outcomes(store, 'poison'))}; {report.summary()}")
    assert not report.lost and not report.unexpected and not report.unfinished
    dead = {key: n for (_, key), n in report.dead.items()}
    poisons = {key for (_, key) in report.starts if not key.startswith("ok-")} | {
        k for k in dead if k.startswith("bad-")
    }
    assert set(dead) == poisons and len(poisons) == 3 * each + undecodable, sorted(dead)
    # A poison runs its attempts; an undecodable payload is a dead letter after one, as it
    # will never decode (a permanent error), and stops nothing else.
    assert {n for k, n in dead.items() if not k.startswith("bad-")} <= {ATTEMPTS}, dead
    assert {n for k, n in dead.items() if k.startswith("bad-")} <= {1}, dead
    runs = {key: report.starts[("poison", key)] for key in dead if not key.startswith("bad-")}
    if kills:
        # Some runs were not charged (their worker died beside them); each charged attempt ran.
        # An attempt marked started can also be charged when the test's SIGKILL lands between
        # the commit that marks it and the function's first line: the kill explains it.
        charged = set(range(1, ATTEMPTS + 1))
        seen = started_attempts(folder)
        explained = explained_attempts(store, folder)
        missing = {
            k: sorted(n for n in charged - seen.get(k, set()) if (k, n) not in explained)
            for k in runs
        }
        missing = {k: numbers for k, numbers in missing.items() if numbers}
        assert not missing, f"attempts charged without a run: {missing}"
        # And none was buried early: its runs, with the charged attempts the kills explain
        # (charged, never entered), make all its attempts.
        unrun = {(k, n) for k, n in explained if n not in seen.get(k, set())}
        short = {
            k: n for k, n in runs.items() if n + sum(1 for key, _ in unrun if key == k) < ATTEMPTS
        }
        assert not short, f"buried before their attempts ran: {short}"
    else:
        assert set(runs.values()) <= {ATTEMPTS}, f"attempts charged without a run: {runs}"
    if each:
        assert outcomes(store, "poison")["crashed"] >= each * ATTEMPTS  # every os._exit


def started_attempts(folder: Path) -> dict[str, set[int]]:
    """The attempt numbers the ledger saw start, per poison key."""
    seen: dict[str, set[int]] = {}
    for entry in ledger.read(folder):
        if entry.kind == "start" and entry.get("function") == "poison":
            seen.setdefault(entry.key, set()).add(int(entry.get("attempt")))
    return seen


def explained_attempts(store: str, folder: Path) -> set[tuple[str, int]]:
    """(poison key, attempt number) of the crashed attempts charged without a ledger line because
    their process died between the attempt's start and its function's first line: killed by
    the test at most KILL_WINDOW seconds after the attempt was marked started, or ended by an
    `exit-` poison running beside it (the runtime charges an attempt marked ahead only once its
    function is entered, tests/contract/queue/test_crash_charges.py, but the function's first line
    may still come after a wave-mate's os._exit). The attempt row's worker is
    `host:pid:suffix`; its started_at is when it was marked started."""
    entries = ledger.read(folder)
    kills: dict[int, list[float]] = {}
    exited = set()  # the processes an exit- poison ended
    for e in entries:
        if e.kind == "kill":
            kills.setdefault(int(e.get("victim")), []).append(e.at / 1e9)
        elif e.kind == "start" and e.key.startswith("exit-"):
            exited.add(e.pid)
    sql = (
        "SELECT e.source, a.number, a.worker, a.started_at FROM oncefire_attempts a"
        " JOIN oncefire_events e ON e.id = a.event_id"
        " WHERE a.function = 'poison' AND a.outcome = 'crashed'"
    )
    explained = set()
    for source, number, worker, marked_at in rows(store, sql):
        pid = int(worker.split(":")[1])
        killed = any(0 <= at - marked_at <= KILL_WINDOW for at in kills.get(pid, []))
        if killed or pid in exited:
            explained.add((source.removeprefix("poison/"), number))
    return explained


def test_a_poison_mix_lands_in_the_dead_letters_after_exactly_its_attempts(
    chaos_store: str, folder: Path
) -> None:
    run_mix(chaos_store, folder, each=1, kills=0)


def test_an_undecodable_payload_is_a_dead_letter_and_stops_nothing_else(
    chaos_store: str, folder: Path
) -> None:
    run_mix(chaos_store, folder, each=0, kills=0, undecodable=2, limit=20)


def test_a_poison_mix_under_kills_is_charged_only_for_runs(
    chaos_store: str, folder: Path, profile: Profile
) -> None:
    run_mix(chaos_store, folder, each=profile.poisons, kills=3)
