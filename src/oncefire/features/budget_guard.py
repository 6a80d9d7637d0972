"""Budget guard: enforces per-function budgets (budgets.py: `budget="5000/day"`, or a failure-rate
trip), fires their alerts, and keeps the paused set a worker leaves out of its leases. A paused
function keeps its deliveries pending; nothing of it runs."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from oncefire.model.budgets import Budget
from oncefire.stores import marks

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oncefire.engine.runtime import Runtime

log = logging.getLogger(__name__)
# How often a worker reads the paused set again (a pause by a person takes effect within it).
REFRESH_EVERY = 3.0
BUDGET_REASON = "budget"
FAILURE_REASON = "failure rate"


class BudgetGuard:
    """What a worker may lease: its functions minus the paused ones, each budgeted function
    capped at what is left of its budget (tripping it pauses the function and alerts once)."""

    def __init__(self, rt: Runtime, functions: Sequence[str]) -> None:
        self.rt = rt
        self.budgets = {
            name: t.options.budget
            for name, t in rt.triggers.items()
            if name in functions and t.options.budget is not None
        }
        self.paused: set[str] = set()
        self._read_at = -math.inf

    def refresh(self, *, force: bool = False) -> None:
        """Read the paused set again when REFRESH_EVERY has passed (or force)."""
        mono = time.monotonic()
        if force or mono - self._read_at >= REFRESH_EVERY:
            self._read_at = mono
            self.paused = self.rt.store.paused_functions()

    def runnable(self, functions: Sequence[str]) -> list[str]:
        """The functions not paused."""
        self.refresh()
        return [f for f in functions if f not in self.paused]

    def caps(self, functions: Sequence[str], caps: dict[str, int]) -> dict[str, int]:
        """max_instances caps with each budget's rest folded in (a cap counts running
        deliveries, as the budget does); a spent budget pauses its function."""
        if not self.budgets:
            return caps
        out = dict(caps)
        now = self.rt.clock.now()
        for name, budget in self.budgets.items():
            if name not in functions:
                continue
            if budget.failure_rate is not None and self.is_failing(name, budget, now):
                out[name] = 0
                continue
            if budget.count is None:
                continue
            since = budget.window_start(now)
            ended, _running = self.rt.store.budget_used(name, since)
            if ended >= budget.count:
                self.trip(name, budget, ended, since, now)
            out[name] = min(out.get(name, budget.count), max(budget.count - ended, 0))
        return out

    def is_failing(self, name: str, budget: Budget, now: float) -> bool:
        """Whether the function's failure rate over its window is past the budget's trip (the
        window starts no earlier than the last trip, so a resumed function starts afresh);
        tripping pauses the function and fires the budget alert once."""
        key = f"failure_rate:{name}"
        tripped = marks.mark_at(self.rt.store, key)
        since = max(now - budget.window, -math.inf if tripped is None else tripped)
        attempts, failed = self.rt.store.failures_after(name, since)
        limit = budget.failure_rate or 1.0
        if attempts < budget.min_attempts or failed / attempts <= limit:
            return False
        self.paused.add(name)
        marks.set_mark(self.rt.store, key, now)  # a resume starts from here
        if self.rt.store.pause_function(name, now, FAILURE_REASON):
            log.warning(
                "function %s paused: %d of its last %d attempts failed, past its budget %s; "
                "`oncefire functions resume %s` continues it",
                name,
                failed,
                attempts,
                budget.text,
                name,
                extra={"function": name},
            )
            fire_failure_rate_alert(self.rt, name, budget, attempts, failed, since, now)
        return True

    def trip(self, name: str, budget: Budget, used: int, since: float, now: float) -> None:
        """Pause a function whose budget is spent, and fire the alert once a window."""
        self.paused.add(name)
        if self.rt.store.pause_function(name, now, BUDGET_REASON):
            log.warning(
                "function %s paused: its budget %s is spent (%d attempts); "
                "`oncefire functions resume %s` continues it",
                name,
                budget.text,
                used,
                name,
                extra={"function": name},
            )
        fire_budget_alert(self.rt, name, budget, used, since, now)


def budget_key(function: str, budget: Budget, window_start: float) -> str:
    """The mark of a budget trip: one a function, budget and window."""
    return f"budget:{function}:{budget.count}/{budget.seconds:g}:{window_start!r}"


def failure_rate_key(function: str, paused_at: float) -> str:
    """The mark of a failure-rate trip: one a pause."""
    return f"budget:{function}:{FAILURE_REASON}:{paused_at!r}"


def _fire(rt: Runtime, key: str, body: dict[str, Any], now: float) -> bool:
    """Fire a budget alert once under key through the app's alerts (marked in the store, tried
    again at the next check when a callback or webhook fails); whether it fired. A Runtime
    without alerts only marks it."""
    if rt.alerts is None:
        return marks.mark(rt.store, key, now)
    alerts = rt.alerts
    return alerts.fire(key, "budget", body, alerts.budget_callbacks, alerts.budget_webhooks, now)


def fire_budget_alert(
    rt: Runtime, function: str, budget: Budget, used: int, window_start: float, now: float
) -> bool:
    """The budget alert kind: fire the budget callbacks and webhooks once per trip (a
    function, its budget and its window; marked in the store, so once across all workers);
    whether it fired."""
    body = {
        "alert": "budget",
        "reason": BUDGET_REASON,
        "function": function,
        "budget": budget.text,
        "used": used,
        "window_start": window_start,
        "at": now,
    }
    if not _fire(rt, budget_key(function, budget, window_start), body, now):
        return False
    log.warning("alert budget fired: function %s spent its budget %s", function, budget.text)
    return True


def fire_failure_rate_alert(
    rt: Runtime, function: str, budget: Budget, attempts: int, failed: int, since: float, now: float
) -> bool:
    """The budget alert of a failure-rate trip paused at `now`: fire the budget callbacks and
    webhooks once per trip (marked in the store); whether it fired."""
    body = {
        "alert": "budget",
        "reason": FAILURE_REASON,
        "function": function,
        "budget": budget.text,
        "attempts": attempts,
        "failed": failed,
        "failure_rate": failed / attempts if attempts else 0.0,
        "window_start": since,
        "at": now,
    }
    if not _fire(rt, failure_rate_key(function, now), body, now):
        return False
    log.warning(
        "alert budget fired: function %s failed %d of %d attempts", function, failed, attempts
    )
    return True


def check_budget_alerts(rt: Runtime) -> int:
    """Fire again the budget alert of each function still paused by a budget trip whose alert
    did not fire (its callback or webhook failed), with the trip's figures read again from the
    store; how many fired."""
    budgets = {
        name: t.options.budget for name, t in rt.triggers.items() if t.options.budget is not None
    }
    if not budgets:
        return 0
    store, fired = rt.store, 0
    for row in store.reads.function_states():
        name, at, reason = row["name"], row["paused_at"], row["paused_reason"]
        budget = budgets.get(name)
        if budget is None or at is None:
            continue
        if reason == BUDGET_REASON and budget.count is not None:
            since = budget.window_start(at)
            if marks.is_marked(store, budget_key(name, budget, since)):
                continue  # alerted already
            used, _running = store.budget_used(name, since)
            fired += fire_budget_alert(rt, name, budget, used, since, at)
        elif reason == FAILURE_REASON and budget.failure_rate is not None:
            if marks.is_marked(store, failure_rate_key(name, at)):
                continue
            since = at - budget.window
            attempts, failed = store.failures_after(name, since)
            fired += fire_failure_rate_alert(rt, name, budget, attempts, failed, since, at)
    return fired
