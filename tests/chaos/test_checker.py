"""The checker fails on hand-made ledgers that break a promise, and passes a clean one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos import ledger
from tests.chaos.checker import Delivery, StoreFacts, check
from tests.chaos.ledger import Entry

F = "record"


def entry(kind: str, key: str, at: int, pid: int = 10, **fields: object) -> Entry:
    return Entry(kind, key, pid, at, {"function": F, "attempt": 1, **fields})


def clean(keys: list[str]) -> tuple[list[Entry], StoreFacts]:
    entries = [entry("ack", k, i) for i, k in enumerate(keys)]
    for i, k in enumerate(keys):
        entries += [entry("start", k, 100 + 3 * i), entry("effect", k, 101 + 3 * i)]
        entries.append(entry("end", k, 102 + 3 * i, ok=True))
    facts = StoreFacts({(F, k): Delivery("succeeded", 1) for k in keys}, {k: 1 for k in keys})
    return entries, facts


def test_a_clean_ledger_passes() -> None:
    report = check(*clean(["a", "b", "c"]))
    assert report.ok, report.summary()
    assert report.acknowledged == 3 and report.most_at_once == {F: 1}


def test_an_acknowledged_event_that_never_ran_is_lost() -> None:
    entries, facts = clean(["a", "b"])
    entries.append(entry("ack", "c", 5))
    report = check(sorted(entries, key=lambda e: e.at), facts)
    assert not report.ok and report.lost == [(F, "c")]


def test_a_succeeded_delivery_without_a_successful_run_is_lost() -> None:
    entries, facts = clean(["a"])
    entries = [e for e in entries if e.kind != "end"]
    assert check(entries, facts).lost == [(F, "a")]


def test_a_run_nobody_acknowledged_is_unexpected() -> None:
    entries, facts = clean(["a"])
    entries.append(entry("start", "zz", 999))
    assert check(entries, facts).unexpected == [(F, "zz")]


def test_a_duplicate_committed_effect_fails() -> None:
    entries, facts = clean(["a", "b"])
    report = check(entries, StoreFacts(facts.deliveries, {"a": 1, "b": 2}))
    assert not report.ok and report.duplicate_committed == ["b"]


def test_an_effect_committed_for_a_write_the_store_does_not_hold_is_an_orphan() -> None:
    entries, facts = clean(["a", "b"])
    deliveries = {k: d for k, d in facts.deliveries.items() if k != (F, "b")}
    report = check(entries, StoreFacts(deliveries, facts.committed))
    assert not report.ok and report.orphan_effects == ["b"]


def test_a_pending_delivery_is_unfinished_and_a_dead_one_is_counted() -> None:
    entries, _ = clean(["a", "b"])
    facts = StoreFacts(
        {(F, "a"): Delivery("pending", 2), (F, "b"): Delivery("dead", 3, "expired: too old")}
    )
    report = check([e for e in entries if e.kind == "ack"], facts)
    assert report.unfinished == [(F, "a")] and not report.ok
    assert report.dead == {(F, "b"): 3} and report.expired == [(F, "b")]


def test_a_second_outside_effect_needs_a_kill_or_a_failure_between() -> None:
    entries, facts = clean(["a"])
    again = [entry("start", "a", 200, pid=11), entry("effect", "a", 201, pid=11)]
    report = check([*entries, *again, entry("end", "a", 202, pid=11, ok=True)], facts)
    assert report.duplicate_outside == [(F, "a")] and not report.ok
    assert report.duplicate_deliveries == 1
    killed = [*entries[:-1], entry("kill", "", 150, pid=1, victim=10), *again]
    assert check(killed, facts).duplicate_outside == []
    failed = [*entries[:-1], entry("end", "a", 102, ok=False), *again]
    report = check(failed, facts)
    assert report.duplicate_outside == [] and report.explained_outside == 1


def repeated(kill_at: int, victim: int = 10) -> list[Entry]:
    """Key a: an attempt with its effect and end (pid 10, 100-102), a kill line, and a second
    attempt that repeats the effect (pid 11: start 200, effect 210, end 220)."""
    entries, _ = clean(["a"])
    again = [
        entry("start", "a", 200, pid=11, attempt=2),
        entry("effect", "a", 210, pid=11, attempt=2),
        entry("end", "a", 220, pid=11, attempt=2, ok=True),
    ]
    kill = entry("kill", "", kill_at, pid=1, victim=victim)
    return sorted([*entries, kill, *again], key=lambda e: e.at)


def test_a_kill_between_an_effect_and_the_start_of_its_repeat_explains_the_repeat() -> None:
    # After the end line too: the @idempotent record is completed after the function returns.
    _, facts = clean(["a"])
    report = check(repeated(kill_at=150), facts)
    assert report.duplicate_outside == [] and report.explained_outside == 1


@pytest.mark.parametrize(
    ("kill_at", "victim"),
    [(230, 10), (205, 10), (150, 12)],
    ids=["after the repeat", "after the repeat started", "another process"],
)
def test_a_kill_that_cannot_have_cut_the_earlier_attempt_leaves_the_repeat_a_duplicate(
    kill_at: int, victim: int
) -> None:
    _, facts = clean(["a"])
    report = check(repeated(kill_at, victim), facts)
    assert report.duplicate_outside == [(F, "a")] and not report.ok
    assert report.explained_outside == 0


def test_each_repeat_of_an_outside_effect_needs_its_own_explanation() -> None:
    _, facts = clean(["a"])
    third = [
        entry("start", "a", 300, pid=12, attempt=3),
        entry("effect", "a", 310, pid=12, attempt=3),
    ]
    report = check([*repeated(kill_at=150), *third], facts)  # the second attempt was not cut
    assert report.duplicate_outside == [(F, "a")] and report.explained_outside == 1
    killed_too = entry("kill", "", 250, pid=1, victim=11)
    report = check([*repeated(kill_at=150), killed_too, *third], facts)
    assert report.duplicate_outside == [] and report.explained_outside == 2


def test_runs_at_once_are_counted_and_a_kill_ends_the_victims_runs() -> None:
    entries = [entry("ack", k, 0) for k in "abc"]
    entries += [entry("start", "a", 1, pid=1), entry("start", "b", 2, pid=2)]
    entries += [entry("kill", "", 3, pid=9, victim=1), entry("start", "c", 4, pid=3)]
    assert check(entries, StoreFacts({})).most_at_once == {F: 2}
    entries.insert(4, entry("start", "d", 3, pid=2))
    assert check(entries, StoreFacts({})).most_at_once == {F: 3}


def test_the_ledger_files_read_back_and_a_cut_line_is_skipped(tmp_path: Path) -> None:
    book = ledger.Ledger(tmp_path, "worker")
    book.acks(["a", "b"], function=F)
    book.write("start", "a", function=F, attempt=1)
    book.close()
    with open(tmp_path / "worker-1.jsonl", "ab") as cut:
        cut.write(b'{"kind":"end","key":"a"')  # a process killed mid-line
    entries = ledger.read(tmp_path)
    assert [(e.kind, e.key, e.pid) for e in entries] == [
        ("ack", "a", os.getpid()),
        ("ack", "b", os.getpid()),
        ("start", "a", os.getpid()),
    ]
