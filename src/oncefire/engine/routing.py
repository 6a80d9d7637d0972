"""A worker's housekeeping of routing and the catalogue: it routes events written with no
delivery ('new' ones, from table triggers, and 'unrouted' ones, once a function that may take
them is registered), keeps each served function's last-seen time, and reopens a SQLite store
whose file was deleted or replaced; and it runs retention's purge step."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

from oncefire.engine.ordering import key_deliveries
from oncefire.errors import StoreError
from oncefire.features import retention
from oncefire.features.budget_guard import BudgetGuard
from oncefire.model.outbox import subscribers
from oncefire.operations.functions import Functions
from oncefire.tables import warn_changed_tables

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oncefire.engine.runtime import Runtime
    from oncefire.events import StoredEvent
    from oncefire.stores.base import FunctionEntry

log = logging.getLogger(__name__)
BATCH = 500  # events routed in one transaction
MOVE_BATCH = 5000  # row changes moved into the outbox in one transaction
MOST_BATCHES = 20  # batches of 'new' events a tick routes, so a tick stays short
TOUCH_EVERY = 60.0  # seconds between two last-seen updates
# A write that read the catalogue before a registration may commit just after it: unrouted
# events are offered to a new function again for this long after its registration.
RACE_SLACK = 10.0


def route_new(rt: Runtime) -> int:
    """Move the row changes table triggers captured into the outbox, then route the events
    marked 'new' to the functions that take them, or mark them 'unrouted'; how many got
    deliveries."""
    store, routed = rt.store, 0
    for _ in range(MOST_BATCHES):
        if store.move_row_changes(MOVE_BATCH) < MOVE_BATCH:
            break
    for _ in range(MOST_BATCHES):
        events = store.events_to_route("new", "", BATCH)
        if not events:
            break
        routed += store.route_events(_routes(rt, events, None), "new", rt.clock.now())
    return routed


def offer_unrouted(rt: Runtime, after: str = "") -> tuple[int, str | None]:
    """Offer the unrouted events of the retention window (from id `after` on, at most
    MOST_BATCHES batches) to the functions new to the store. Idempotent: an event is routed
    once, whoever routes it. (How many got deliveries, the id to go on from next time or None
    when the scan is complete.)"""
    store = rt.store
    names = set(store.functions_to_route())
    if not names:
        return 0, None
    now = rt.clock.now()
    oldest = now - rt.settings.unrouted_retention
    routed = 0
    for _ in range(MOST_BATCHES):
        events = store.events_to_route("unrouted", after, BATCH)
        if not events:
            break
        after = events[-1].id
        recent = [e for e in events if e.time >= oldest]
        routed += store.route_events(_routes(rt, recent, names), "unrouted", now)
    else:
        return routed, after  # more to scan at the next sweep
    for record in _functions(rt):
        if record.name in names and record.registered_at <= now - RACE_SLACK:
            store.routing_done(record.name)
    if routed:
        log.info("%d unrouted event(s) delivered to newly registered function(s)", routed)
    return routed, None


def _functions(rt: Runtime) -> list[FunctionEntry]:
    with rt.store.read() as tx:
        return tx.functions()


def _routes(
    rt: Runtime, events: Sequence[StoredEvent], only: set[str] | None
) -> list[tuple[str, Sequence[str]]]:
    """(event id, functions) for each event; with `only`, the events one of those takes."""
    functions = _functions(rt)
    routes: list[tuple[str, Sequence[str]]] = []
    for event in events:
        names = subscribers(functions, event.type, event.source, event.data)
        if only is None or only.intersection(names):
            routes.append((event.id, names))
    return routes


class Housekeeping:
    """Runs the housekeeping above from a worker's sweep, and holds its budget guard."""

    def __init__(self, rt: Runtime, functions: Sequence[str]) -> None:
        self.rt = rt
        self.functions = list(functions)
        self.budgets = BudgetGuard(rt, self.functions)
        self.keyed = {  # the functions ordered by a computed key: their workers key them
            name: t
            for name, t in rt.triggers.items()
            if name in self.functions and t.options.ordering_key is not None
        }
        self._touched = -math.inf
        self._offered_to = ""  # where the scan of unrouted events goes on
        self._purge_again = math.inf  # when a purge behind retention steps again

    def leasable(self, functions: Sequence[str]) -> list[str]:
        """The functions a lease may take now (not paused), with the ordering keys of their
        new deliveries computed first (a delivery is leased only once it has its key)."""
        runnable = self.budgets.runnable(functions)
        keyed = {name: self.keyed[name] for name in runnable if name in self.keyed}
        key_deliveries(self.rt.store, keyed, self.rt.clock.now())
        return runnable

    def tick(self) -> None:
        """One round: reopen a moved store, touch, route, purge what retention lets go."""
        rt = self.rt
        if rt.store.reopen_if_moved():
            log.error(
                "the store file of %s was deleted or replaced while this worker ran: reopened "
                "it (registering the functions again), so new writes reach this worker",
                rt.settings.store,
            )
            rt.register_all()
        mono = time.monotonic()
        if mono - self._touched >= TOUCH_EVERY:
            self._touched = mono
            rt.store.touch_functions(self.functions, rt.clock.now())
        route_new(rt)
        self._offered_to = offer_unrouted(rt, self._offered_to)[1] or ""
        self.purge()  # after routing: an unrouted event is offered, then purged

    def purge(self) -> None:
        """A purge step; one that ended with rows left makes catch_up() step again soon."""
        started = time.monotonic()
        step = retention.purge_step(self.rt)
        took = time.monotonic() - started
        self._purge_again = (
            started + took * retention.CATCH_UP_EVERY if step.is_behind else math.inf
        )

    @property
    def is_purge_behind(self) -> bool:
        """Whether the last purge step ended with rows left (catch_up() will step again)."""
        return self._purge_again != math.inf

    def catch_up(self) -> None:
        """Between sweeps: a purge step, if the last one left rows and its pause has passed."""
        if time.monotonic() >= self._purge_again:
            self.purge()

    def warn_unserved(self, *, is_process: bool = False) -> None:
        """What a worker says at its start (warn_at_start), unless it is one of a
        supervisor's processes: the supervisor says it once for all of them."""
        if not is_process:
            warn_at_start(self.rt)


def warn_at_start(rt: Runtime) -> None:
    """One WARNING line per watched table that changed since its triggers were made
    (tables.changed_tables), and warn_stranded's."""
    warn_changed_tables(rt.store)
    warn_stranded(rt)


def warn_stranded(rt: Runtime) -> None:
    """One WARNING line naming the functions this app does not define whose deliveries wait
    (a function renamed or removed in code); said once per process for the same names."""
    try:
        stranded = Functions(rt).stranded()
    except StoreError as exc:  # the store is down: the work itself will say so
        log.error("cannot read the stored functions: %s", exc)
        return
    key = "stranded:" + ",".join(stranded)
    if not stranded or key in rt.warned:
        return
    rt.warned.add(key)
    log.warning(
        "stored function(s) this app does not serve, with pending deliveries: %s; they wait "
        "for no one (`oncefire functions rename OLD NEW` if one was renamed, `oncefire "
        "functions forget NAME` if it is gone)",
        ", ".join(f"{name} ({n})" for name, n in stranded.items()),
    )
