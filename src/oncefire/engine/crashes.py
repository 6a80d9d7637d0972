"""A test hook (`oncefire.testing.crash_after_effect`): attempts of a function end as if their
worker died the moment the function returned. Nothing of the ending is written (not the
attempt, not the @idempotent records it completed) and its lease is no longer renewed, so the
delivery is rescued once the lease runs out and delivered again. Off (no plan, always outside
tests) it costs one global read per attempt.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(eq=False)
class CrashPlan:
    """End the next `times` attempts of `function` on one app's runtime as crashes."""

    runtime: object
    function: str
    times: int
    crashed: int = 0  # attempts ended so far


PLANS: list[CrashPlan] = []
_lock = threading.Lock()


def start(plan: CrashPlan) -> None:
    """Apply a plan to the attempts that return from now on."""
    with _lock:
        PLANS.append(plan)


def stop(plan: CrashPlan) -> None:
    """Stop applying a plan."""
    with _lock:
        PLANS.remove(plan)


def is_crashed(runtime: object, function: str, delivery_id: int) -> bool:
    """Whether the attempt of `function` that just returned on `runtime` ends as a crash
    (counted against its plan when it does)."""
    with _lock:
        plan = next(
            (
                p
                for p in PLANS
                if p.runtime is runtime and p.function == function and p.crashed < p.times
            ),
            None,
        )
        if plan is None:
            return False
        plan.crashed += 1
    log.info(
        "%s: delivery %d ended as if its worker died (crash_after_effect)", function, delivery_id
    )
    return True
