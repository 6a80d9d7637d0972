"""Schedule ticks: the event of each due schedule, emitted once across all workers."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from oncefire import codec
from oncefire.events import EventType
from oncefire.outbox import emit

if TYPE_CHECKING:
    from oncefire.runtime import Runtime


def fire_due(rt: Runtime) -> int:
    """Emit the tick of each schedule that is due and move its next tick on; how many fired
    (a tick another worker emitted first is not counted)."""
    store, triggers, next_tick, now = rt.store, rt.triggers, rt.next_tick, rt.clock.now()
    fired = 0
    for name, due in list(next_tick.items()):
        if due > now:
            continue
        trigger = triggers[name]
        assert trigger.schedule is not None
        # The id is derived from the schedule and the tick, so every worker emits the same
        # event and the store keeps the first.
        digest = int.from_bytes(hashlib.sha256(f"{name}@{due}".encode()).digest()[:8], "big")
        with store.transaction() as tx:
            if emit(
                tx,
                event_type=EventType.SCHEDULE_TICK,
                source=name,
                data={"scheduled_time": due, "schedule": trigger.schedule.spec},
                now=due,
                event_id=codec.stable_id(due, digest),
            ):
                fired += 1
        next_tick[name] = trigger.schedule.next_after(max(due, now))
    return fired
