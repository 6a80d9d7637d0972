"""The leases a worker gives up (released, never started) and those a stopped worker left
(rescued: counted as a crashed attempt if its function may have run)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from oncefire.engine import endings, leased_records
from oncefire.errors import StoreError
from oncefire.retry import Outcome
from oncefire.stores.base import Ending

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oncefire.engine.runtime import Runtime
    from oncefire.stores.base import Lease

log = logging.getLogger("oncefire.engine.worker")

RESCUE_BATCH = 256  # leases re-leased to a rescuer per statement


def rescue(rt: Runtime, functions: Sequence[str]) -> tuple[int, int]:
    """For each delivery whose lease ran out: write a crashed attempt (and retry or bury it)
    if its function was started, or release it uncounted if it never was or if it was marked
    ahead (then solo). Each is first re-leased to this worker in one atomic statement, so two
    rescuers never take the same delivery; batches are taken until none is left. Returns
    (leases that ran out, crashed attempts written)."""
    taken = crashed = 0
    while True:
        now = rt.clock.now()
        expired = rt.store.take_expired_leases(
            now, now + rt.settings.lease, functions, RESCUE_BATCH
        )
        taken += len(expired)
        # What never started gets its record back (acquired with its lease: leased_records.py). One
        # marked ahead keeps it, as one marked started does: its function may have been entered
        # before a commit could confirm it, and its worker may only be stalled.
        leased_records.release_rescued(rt, [i for i in expired if not i.is_started])
        unstarted = [item.lease for item in expired if not item.is_started]
        if unstarted:
            released = rt.store.release(unstarted)
            log.info("released %d delivery(ies) a stopped worker held but never started", released)
        # Marked ahead, with others: whether each ran, or which one ended the process, is
        # not known. Released uncounted; each runs alone from now on, and counts
        # as crashed if it crashes alone. The records acquired with their lease are kept (one may
        # have run): each is due when its record may be taken over.
        ahead: dict[float | None, list[Lease]] = {}
        for item in expired:
            if item.is_started and item.is_ahead:
                ahead.setdefault(leased_records.takeable_at(rt, item, now), []).append(item.lease)
        for run_at, leases in ahead.items():
            released = rt.store.release(leases, is_solo=True, run_at=run_at)
            log.info("released %d delivery(ies) a stopped worker marked ahead", released)
        for item in expired:
            if item.is_started and not item.is_ahead:
                ending = Ending(
                    Outcome.CRASHED,
                    f"worker died or stalled: lease ran out during attempt {item.attempt}",
                )
                crashed += endings.write_ending(rt, rt.triggers[item.function], item, ending)
        if len(expired) < RESCUE_BATCH:
            return taken, crashed


def release_unstarted(rt: Runtime, worker: str, leases: Sequence[Lease]) -> None:
    """Release, uncounted, deliveries leased here that never started; never raises."""
    if not leases:
        return
    try:
        released = rt.store.release(leases)
    except StoreError as exc:
        log.error(
            "worker %s could not release %d delivery(ies) (%s): their leases will run out "
            "and they will run elsewhere",
            worker,
            len(leases),
            exc,
        )
    else:
        log.info("worker %s released %d unstarted delivery(ies)", worker, released)
