"""Schedule ticks: each tick a schedule's missed-tick policy fires, emitted once across all
workers.

A worker looks at a schedule when its next tick is due (it sleeps no longer than that) and
emits the ticks the policy (schedules.py) fires. A tick's event id is derived from the
schedule and the tick, so every worker emits the same event and the store keeps the first.
The store also keeps each schedule's last tick handled, fired or skipped: a worker that
starts after a downtime finds there the ticks missed meanwhile.
"""

from __future__ import annotations

import hashlib
import logging
import math
from typing import TYPE_CHECKING

from oncefire.clock import to_datetime
from oncefire.events import EventType
from oncefire.model import codec
from oncefire.model.outbox import emit

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime
    from oncefire.model.schedules import Schedule, TickCursor
    from oncefire.stores.base import DocumentTx

log = logging.getLogger(__name__)


def fire_due(rt: Runtime) -> int:
    """Emit the ticks due now that each schedule's policy fires, and record the newest due
    tick as handled; how many fired (a tick another worker emitted first is not counted)."""
    now = rt.clock.now()
    if seconds_to_next(rt, now) > 0:
        return 0
    fired = 0
    with rt.tick_lock:
        for name, cursor in rt.tick_cursors.items():
            schedule = rt.triggers[name].schedule
            if cursor.next_look <= now and schedule is not None:
                fired += _look(rt, name, schedule, cursor, now)
    return fired


def poll_interval(rt: Runtime) -> float:
    """The longest an idle worker sleeps: the poll interval, or less when a schedule's next
    tick is due sooner."""
    return min(rt.settings.poll_interval, seconds_to_next(rt, rt.clock.now()))


def seconds_to_next(rt: Runtime, now: float) -> float:
    """How long until a schedule's next tick is due (0: one is; inf: there is none)."""
    if not rt.tick_cursors:
        return math.inf
    return max(0.0, min(c.next_look for c in rt.tick_cursors.values()) - now)


def _look(rt: Runtime, name: str, schedule: Schedule, cursor: TickCursor, now: float) -> int:
    fired = 0
    if cursor.last is None:
        with rt.store.transaction() as tx:
            cursor.last = tx.tick_after(name, cursor.known_since)
    newest = schedule.last_until(now)
    if newest > cursor.last:
        firing = schedule.to_fire(cursor.last, now, cursor.known_since)
        with rt.store.transaction() as tx:
            fired = sum(_emit(tx, name, schedule, due, now) for due in firing)
            tx.record_tick(name, newest)
        if firing != [newest] or schedule.next_after(cursor.last) != newest:
            log.warning(
                "schedule %s missed its ticks from %s to %s: %d fired (catch_up=%r, "
                "misfire_grace=%g s)",
                name,
                to_datetime(schedule.next_after(cursor.last)).isoformat(),
                to_datetime(newest).isoformat(),
                len(firing),
                schedule.catch_up,
                schedule.misfire_grace,
            )
        cursor.last = newest
    cursor.next_look = schedule.next_after(now)
    return fired


def _emit(tx: DocumentTx, name: str, schedule: Schedule, due: float, now: float) -> bool:
    """Emit one tick, its event time the time it fired; whether this call stored it."""
    # The id is derived from the schedule and the tick, so every worker emits the same
    # event and the store keeps the first.
    digest = int.from_bytes(hashlib.sha256(f"{name}@{due}".encode()).digest()[:8], "big")
    event = emit(
        tx,
        event_type=EventType.SCHEDULE_TICK,
        source=name,
        data={"scheduled_time": due, "schedule": schedule.spec},
        now=now,
        event_id=codec.stable_id(due, digest),
    )
    return event is not None
