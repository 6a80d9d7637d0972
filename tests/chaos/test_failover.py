"""Issue 48 point 4: losing the database machine. A primary and a streaming standby
(`pg_basebackup -R`) on private clusters; workers and a producer on a URL that names both; in
the middle of the load the standby falls behind (the primary's WAL sender stopped), then the
primary is lost (its WAL sender killed, `pg_ctl stop -m immediate`) and the standby promoted
(`pg_ctl promote`). No process is restarted by hand: every one finds the new primary itself.

Synchronous replication: nothing acknowledged is lost (the commits held back were never
acknowledged), no effect is committed twice or for a write that is not there, nothing is left
undone. Asynchronous: what is lost is the writes acknowledged while the standby was behind,
each producer transaction whole or not at all (a document never without its event), and still
no orphan effect: a worker that ran a delivery the failover lost cannot commit its effect on
the new primary (oncefire/model/fencing.py; without it, every run here commits some).
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import pytest

from tests.chaos import ledger
from tests.chaos.harness import Workers, outcomes, produce, rows, unsettled, verdict, wait_for
from tests.pg_cluster import Cluster, replicated

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

EVENTS = 300
BATCH = 10  # the producer's transaction: 10 documents and their events
PAUSE = 0.2  # seconds between two of them: the load goes on across the fault, the workers
# keeping up (`call` works 20 to 200 ms before its commit; 8 run at once)
LAGGED = 3 * BATCH  # writes acknowledged while an asynchronous standby is held behind, and
# some of them started: the crash finds their attempts running, their leases not on the standby
RESUME_BOUND = 15.0  # seconds from the promotion to the first effect committed after it
LAG_BOUND = 1.0  # seconds an asynchronous standby here lags, besides while it is held back


def acknowledged(folder: Path) -> int:
    """How many writes the producer has acknowledged so far."""
    return sum(1 for e in ledger.read(folder) if e.kind == "ack")


def started_since(folder: Path, at: int) -> int:
    """How many attempts of writes acknowledged since a moment have started."""
    entries = ledger.read(folder)
    written = {e.key for e in entries if e.kind == "ack" and e.at > at}
    return sum(1 for e in entries if e.kind == "start" and e.key in written)


def waiting_for_standby(primary: Cluster) -> int:
    """Sessions whose commit waits for the synchronous standby."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
    return int(str(primary.admin(sql)[0][0]))


def serving(workers: Workers) -> int:
    """How many worker processes said they serve."""
    return workers.log.read_text(errors="replace").count(" serving ")


def ended_after(folder: Path, at: int) -> int | None:
    """The time.time_ns() of the first attempt end after a moment, if any."""
    return next((e.at for e in ledger.read(folder) if e.kind == "end" and e.at > at), None)


def url_of(*clusters: Cluster) -> str:
    """A URL that names each server, in turn."""
    listed = ",".join(f"127.0.0.1:{c.port}" for c in clusters)
    return f"postgresql://postgres@{listed}/chaos_failover"


def half_transactions(store: str) -> list[str]:
    """Documents without their creation event, events without their document, and producer
    batches kept in part: what a transaction split by the failover would leave."""
    found = [
        f"document {path} without its event"
        for (path,) in rows(
            store,
            "SELECT d.path FROM oncefire_documents d WHERE d.collection = 'calls' AND NOT EXISTS"
            " (SELECT 1 FROM oncefire_events e WHERE e.source = d.path)",
        )
    ]
    found += [
        f"event of {source} without its document"
        for (source,) in rows(
            store,
            "SELECT e.source FROM oncefire_events e WHERE e.source LIKE 'calls/%' AND NOT EXISTS"
            " (SELECT 1 FROM oncefire_documents d WHERE d.path = e.source)",
        )
    ]
    kept = [int(str(path).removeprefix("calls/k")) for (path,) in rows(
        store, "SELECT path FROM oncefire_documents WHERE collection = 'calls'"
    )]  # fmt: skip
    batches: dict[int, int] = {}
    for n in kept:
        batches[n // BATCH] = batches.get(n // BATCH, 0) + 1
    found += [f"batch {b} kept {n} of {BATCH}" for b, n in batches.items() if n != BATCH]
    return found


@pytest.mark.parametrize("is_synchronous", [True, False], ids=["synchronous", "asynchronous"])
def test_a_failover_to_a_promoted_standby(folder: Path, is_synchronous: bool) -> None:
    mode = "synchronous" if is_synchronous else "asynchronous"
    with replicated(is_synchronous=is_synchronous) as (primary, standby):
        primary.create_database("chaos_failover")
        standby.caught_up(primary)
        store = url_of(primary, standby)
        workers = Workers(store, folder, processes=2)
        wait_for("both workers to serve", lambda: serving(workers) == 2, 60, workers.log)
        producer = produce(store, folder, "calls", "call", EVENTS, batch=BATCH, pause=PAUSE)
        try:
            wait_for(
                "a third of the writes, and work, before the fault",
                lambda: acknowledged(folder) >= EVENTS // 3 and ended_after(folder, 0),
                60,
                workers.log,
            )
            # The standby falls behind (the primary's WAL sender stopped) while work goes on:
            # an asynchronous standby misses what is committed meanwhile; a synchronous one
            # holds every commit back until the crash, unacknowledged.
            workers.book.write("fault", "", fault="failover", phase="begin", sync=True)
            held_at, held_ns = acknowledged(folder), time.time_ns()
            primary.hold_replication(True)
            wait_for(
                "commits held back by the standby" if is_synchronous else "writes meanwhile",
                lambda: (
                    waiting_for_standby(primary) >= 1
                    if is_synchronous
                    else acknowledged(folder) >= held_at + LAGGED
                    and started_since(folder, held_ns) >= 3
                ),
                60,
                workers.log,
            )
            primary.crash()
            killed_at = time.time_ns()  # once it is down: no commit comes after
            standby.promote()
            promoted_at = time.time_ns()
            workers.book.write("fault", "", fault="failover", phase="promoted", sync=True)
            resumed_at = wait_for(
                "work after the promotion",
                partial(ended_after, folder, promoted_at),
                60,
                workers.log,
            )
            assert producer.wait(120) == 0
            wait_for("every delivery to settle", lambda: unsettled(store) == 0, 120, workers.log)
            assert workers.proc is not None and workers.proc.poll() is None, "the workers exited"
        finally:
            workers.stop()
            if producer.poll() is None:
                producer.kill()
                producer.wait(10)
        report = verdict(store, folder)
        halves = half_transactions(store)
        attempts = dict(outcomes(store, "call"))
    resumed = (resumed_at - promoted_at) / 1e9
    entries = ledger.read(folder)
    acks = {e.key: e.at for e in entries if e.kind == "ack"}
    before = sum(1 for e in entries if e.kind == "ack" and e.at < killed_at)
    ended = sum(1 for e in entries if e.kind == "end" and e.at < killed_at)
    lost_window = max(((killed_at - acks[k]) / 1e9 for _, k in report.lost), default=0.0)
    held = (killed_at - held_ns) / 1e9
    print(
        f"\n[chaos] failover ({mode} standby), killed after {before} writes and {ended} "
        f"attempts, the standby held back {held:.2f} s: the first effect committed "
        f"{resumed:.2f} s after the promotion; lost {len(report.lost)} acknowledged writes "
        f"(acknowledged at most {lost_window:.2f} s before the crash); attempts {attempts}; "
        f"{report.summary()}"
    )
    assert resumed < RESUME_BOUND
    assert report.acknowledged == EVENTS
    assert halves == []
    assert not (report.unexpected or report.unfinished), report.summary()
    assert not (report.duplicate_committed or report.orphan_effects), report.summary()
    assert report.dead == {}, report.summary()
    if is_synchronous:
        assert report.ok, report.summary()
        return
    # Asynchronous: only writes acknowledged while the standby was behind may be lost (what
    # came after the crash went to the new primary).
    since = held_ns - int(LAG_BOUND * 1e9)
    assert all(since <= acks[k] <= killed_at for _, k in report.lost), report.summary()
    # An outside effect repeats only when the @idempotent record of its first run was
    # completed in that window, and lost with it.
    first_effect: dict[str, int] = {}
    for e in entries:
        if e.kind == "effect":
            first_effect.setdefault(e.key, e.at)
    repeated = [k for _, k in report.duplicate_outside if first_effect[k] < since]
    assert repeated == [], report.summary()
