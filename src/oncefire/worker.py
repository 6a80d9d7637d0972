"""A worker: claims due deliveries, runs them with bounded concurrency, renews their leases."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oncefire import execution, ttl
from oncefire.execution import Ending
from oncefire.retry import Outcome
from oncefire.stores.base import Claimed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oncefire.app import App
    from oncefire.triggers import Trigger

log = logging.getLogger(__name__)

# An attempt past its timeout gets this much longer before the worker records it as one,
# so an async function's own cancellation is recorded first.
TIMEOUT_GRACE = 0.5


@dataclass(frozen=True, slots=True)
class DrainSummary:
    """What a drain ran: attempts by outcome."""

    attempts: int
    outcomes: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, outcome: str) -> int:
        return self.outcomes.get(outcome, 0)


@dataclass(slots=True)
class _InFlight:
    claimed: Claimed
    trigger: Trigger
    deadline: float
    is_stuck: bool = False


def worker_name() -> str:
    """A name that tells which host and process holds a lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs an App's deliveries in this process; drain() for scripts, run() for service."""

    def __init__(
        self,
        app: App,
        *,
        concurrency: int | None = None,
        functions: Sequence[str] | None = None,
        is_process: bool = False,
    ) -> None:
        self.app = app
        self.name = worker_name()
        self.concurrency = concurrency or app.settings.concurrency
        self.functions = list(functions or app.triggers)
        self.is_process = (
            is_process  # a stuck sync attempt ends the process (the supervisor restarts it)
        )
        self.stop_requested = threading.Event()
        self.outcomes: Counter[str] = Counter()
        self._inflight: dict[Future[Ending], _InFlight] = {}
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="oncefire-attempt")
        self._caps = {
            name: t.options.max_instances
            for name, t in app.triggers.items()
            if t.options.max_instances is not None and name in self.functions
        }
        self._last_renew = self._last_sweep = time.monotonic()
        self.has_stuck_attempt = False

    # -- the loop ----------------------------------------------------------------------

    def claim_and_start(self, delivery_ids: Sequence[int] | None = None) -> int:
        """Claim as many due deliveries as there are free slots and start them."""
        free = self.concurrency - len(self._inflight)
        if free <= 0 or self.stop_requested.is_set() or self.has_stuck_attempt:
            return 0
        now = self.app.clock.now()
        claimed = self.app.store.claim(
            worker=self.name,
            now=now,
            lease_until=now + self.app.settings.lease,
            limit=min(free, self.app.settings.batch_size),
            functions=self.functions,
            caps=self._caps,
            delivery_ids=delivery_ids,
        )
        for item in claimed:
            trigger = self.app.triggers[item.function]
            deadline = time.monotonic() + trigger.options.timeout + TIMEOUT_GRACE
            future = self._pool.submit(execution.run, self.app, trigger, item)
            self._inflight[future] = _InFlight(item, trigger, deadline)
        return len(claimed)

    def collect(self, timeout: float) -> int:
        """Wait up to timeout for attempts to end; record timeouts; return how many ended."""
        if not self._inflight:
            return 0
        done, _ = wait(list(self._inflight), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            flight = self._inflight.pop(future)
            if not flight.is_stuck:
                self.outcomes[future.result().outcome] += 1
        self._check_deadlines()
        return len(done)

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for flight in self._inflight.values():
            if flight.is_stuck or now < flight.deadline:
                continue
            flight.is_stuck = True
            ending = Ending(Outcome.TIMEOUT, f"timed out after {flight.trigger.options.timeout} s")
            execution.record(self.app, flight.trigger, flight.claimed, ending)
            self.outcomes[Outcome.TIMEOUT] += 1
            if self.is_process and not flight.trigger.is_async:
                # A thread cannot be stopped: this process stops claiming and exits once the
                # other attempts end, and its supervisor starts a fresh one.
                self.has_stuck_attempt = True

    def maintain(self, *, force: bool = False) -> None:
        """Renew our leases and rescue deliveries whose worker died, when each is due."""
        settings = self.app.settings
        mono = time.monotonic()
        if force or mono - self._last_renew >= settings.renew_every:
            self._last_renew = mono
            self.renew()
        if force or mono - self._last_sweep >= settings.sweep_every:
            self._last_sweep = mono
            self.rescue()
            self.app.fire_due_schedules()
            ttl.sweep(self.app)

    def renew(self) -> None:
        """Extend the lease of every attempt still running here."""
        leases = [f.claimed.lease for f in self._inflight.values() if not f.is_stuck]
        if not leases:
            return
        now = self.app.clock.now()
        kept = set(self.app.store.renew(leases, now, now + self.app.settings.lease))
        for flight in self._inflight.values():
            if flight.claimed.lease not in kept and not flight.is_stuck:
                flight.is_stuck = True  # someone else owns it now; our result will be discarded
                log.warning(
                    "%s lost the lease of delivery %d",
                    self.name,
                    flight.claimed.lease.delivery_id,
                    extra={
                        "delivery_id": flight.claimed.lease.delivery_id,
                        "function": flight.trigger.name,
                    },
                )

    def rescue(self) -> int:
        """Record a crashed attempt for each delivery whose lease ran out, and retry or bury it."""
        now = self.app.clock.now()
        expired = self.app.store.expired_leases(now, self.functions, 100)
        for item in expired:
            trigger = self.app.triggers[item.function]
            ending = Ending(
                Outcome.CRASHED,
                f"worker died or stalled: lease ran out during attempt {item.attempt}",
            )
            execution.record(self.app, trigger, item, ending)
            self.outcomes[Outcome.CRASHED] += 1
        return len(expired)

    # -- entry points ------------------------------------------------------------------

    def drain(self, delivery_ids: Sequence[int] | None = None) -> DrainSummary:
        """Run every delivery due now (and what becomes due meanwhile) until none is left."""
        self.maintain(force=True)
        while True:
            started = self.claim_and_start(delivery_ids)
            if not self._inflight:
                if started == 0 and self.rescue() == 0 and not self.app.fire_due_schedules():
                    break
                continue
            self.collect(0.05)
        return self.summary()

    def run(self) -> None:
        """Serve until stop_requested is set, then shut down gracefully."""
        settings = self.app.settings
        log.info("worker %s serving %d function(s)", self.name, len(self.functions))
        self.maintain(force=True)
        while not self.stop_requested.is_set():
            started = self.claim_and_start()
            self.maintain()
            if self.has_stuck_attempt and not any(not f.is_stuck for f in self._inflight.values()):
                log.error("worker %s has a stuck attempt past its timeout: exiting", self.name)
                break
            if self._inflight:
                self.collect(0.005 if started else 0.02)
            elif started == 0:
                self.app.store.wait(settings.poll_interval)
        self.shutdown()

    def shutdown(self) -> None:
        """Let in-flight attempts finish within the grace period, then hand back the rest."""
        deadline = time.monotonic() + self.app.settings.shutdown_grace
        while self._inflight and any(not f.is_stuck for f in self._inflight.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.collect(min(remaining, 0.1))
            self.maintain()
        leftovers = [f.claimed.lease for f in self._inflight.values() if not f.is_stuck]
        if leftovers:
            released = self.app.store.release(leftovers)
            log.warning("worker %s handed back %d unfinished delivery(ies)", self.name, released)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def summary(self) -> DrainSummary:
        """Attempts run so far by outcome."""
        return DrainSummary(
            sum(self.outcomes.values()), {str(k): v for k, v in self.outcomes.items()}
        )
