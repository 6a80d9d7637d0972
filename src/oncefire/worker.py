"""A worker: claims due deliveries, runs them with bounded concurrency, renews their leases."""

from __future__ import annotations

import logging
import math
import os
import queue
import socket
import threading
import time
import uuid
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oncefire import execution, ttl
from oncefire.errors import StoreError
from oncefire.execution import Ending, EventLoopThread
from oncefire.retry import Outcome
from oncefire.stores.base import Claimed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oncefire.app import App
    from oncefire.triggers import Trigger

log = logging.getLogger(__name__)

# An async attempt past its timeout gets this much longer before the worker records it as
# one, so that its own cancellation is recorded first; a sync one cannot be cancelled.
TIMEOUT_GRACE = 0.5
# How long the loop pauses after the store failed (a database restart) before trying again.
STORE_BACKOFF = 1.0
# A claim takes about this many seconds of work beyond the free slots, at the attempts' mean
# duration: enough that a commit serves many events, little enough to share a backlog.
PREFETCH = 0.05


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
    started: float  # time.monotonic() at its start
    is_settled: bool = False  # its result no longer counts: timed out, or its lease was lost
    is_overdue: bool = False  # still running past its deadline


def worker_name() -> str:
    """A name that tells which host and process holds a lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs an App's deliveries in this process; drain() for scripts, run() for service.

    The loop claims a batch of due deliveries (one transaction), starts them as slots come
    free, and records the attempts that ended in one transaction too: with a durable commit
    costing a disk flush, two flushes per batch instead of two per delivery.
    """

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
        self.batch_size = max(app.settings.batch_size, self.concurrency)
        self.functions = list(functions or app.triggers)
        # An attempt that cannot be stopped ends the process (its supervisor starts another).
        self.is_process = is_process
        self.stop_requested = threading.Event()
        self.outcomes: Counter[str] = Counter()
        self._queue: deque[Claimed] = deque()  # claimed (leased), not started yet
        self._inflight: dict[Future[Ending], _InFlight] = {}
        # Ended futures, with when they ended.
        self._done: queue.SimpleQueue[tuple[Future[Ending], float]] = queue.SimpleQueue()
        self._ended: list[tuple[_InFlight, Ending]] = []  # ended, not recorded yet
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="oncefire-attempt")
        self._loop: EventLoopThread | None = None  # started with the first async attempt
        self._caps = {
            name: t.options.max_instances
            for name, t in app.triggers.items()
            if t.options.max_instances is not None and name in self.functions
        }
        self._last_renew = self._last_sweep = time.monotonic()
        self.has_stuck_attempt = False
        self._mean_duration: float | None = None  # of recent attempts, in seconds

    # -- the loop ----------------------------------------------------------------------

    @property
    def is_busy(self) -> bool:
        """Whether anything is claimed here and not yet recorded."""
        return bool(self._queue or self._inflight or self._ended)

    def claim_and_start(self, delivery_ids: Sequence[int] | None = None) -> int:
        """Record the attempts that ended and claim more once the local queue is empty, in
        one store transaction, then start what the free slots allow; how many were claimed."""
        can_claim = (
            not self._queue
            and len(self._inflight) < self.concurrency
            and not self.stop_requested.is_set()
            and not self.has_stuck_attempt
        )
        must_record = bool(self._ended) and (not self._queue or len(self._ended) >= self.batch_size)
        batch: list[Claimed] = []
        if can_claim or must_record:
            with self.app.store.batch():  # one commit: a disk flush saved per batch
                if must_record:
                    self._record(self._ended)
                if can_claim:
                    now = self.app.clock.now()
                    batch = self.app.store.claim(
                        worker=self.name,
                        now=now,
                        lease_until=now + self.app.settings.lease,
                        limit=self.claim_limit(),
                        functions=self.functions,
                        caps=self._caps,
                        delivery_ids=delivery_ids,
                    )
            if must_record:  # only once committed: a failed commit records them again
                for _, ending in self._ended:
                    self.outcomes[ending.outcome] += 1
                self._ended.clear()
            self._queue.extend(batch)
        while self._queue and len(self._inflight) < self.concurrency:
            self._start(self._queue.popleft())
        return len(batch)

    def claim_limit(self) -> int:
        """How many deliveries to claim: the free slots, plus about PREFETCH seconds of work
        at the attempts' recent mean duration, up to batch_size. Short functions come in large
        batches (few commits an event); slow ones one a slot, so no process hoards a backlog
        that idle processes could run."""
        free = self.concurrency - len(self._inflight)
        if self._mean_duration is None:
            return free
        ahead = self.concurrency * PREFETCH / max(self._mean_duration, 1e-6)
        return max(free, min(self.batch_size, free + int(ahead)))

    def _start(self, item: Claimed) -> None:
        trigger = self.app.triggers[item.function]
        started = time.monotonic()
        future: Future[Ending]
        if trigger.is_async:
            if self._loop is None:
                self._loop = EventLoopThread()
            future = self._loop.submit(execution.run_async(self.app, trigger, item))
            deadline = started + trigger.options.timeout + TIMEOUT_GRACE
        else:
            future = self._pool.submit(execution.run, self.app, trigger, item)
            deadline = started + trigger.options.timeout
        self._inflight[future] = _InFlight(item, trigger, deadline, started)
        # O(1) per attempt, unlike wait() on them all; the time is when it ended, not when
        # the loop came to look.
        future.add_done_callback(lambda f: self._done.put((f, time.monotonic())))

    def collect(self, timeout: float) -> int:
        """Wait up to timeout for attempts to end and set them aside for recording (timeouts
        are recorded at once); how many ended."""
        ended = 0
        if self._inflight:
            done = []
            with suppress(queue.Empty):
                done.append(self._done.get(timeout=timeout))
                while True:
                    done.append(self._done.get_nowait())
            for future, finished in done:
                flight = self._inflight.pop(future)
                ended += 1
                self._learn(finished - flight.started)
                error = None if future.cancelled() else future.exception()
                if error is not None:
                    log.error(
                        "%s could not finish attempt %d of event %s: %s",
                        flight.trigger.name,
                        flight.claimed.attempt,
                        flight.claimed.event.id,
                        error,
                        extra=self._extra(flight),
                    )
                elif not flight.is_settled and not future.cancelled():
                    self._ended.append((flight, future.result()))
            self._check_deadlines()
        return ended

    def _learn(self, duration: float) -> None:
        if self._mean_duration is None:
            self._mean_duration = duration
        else:
            self._mean_duration += (duration - self._mean_duration) * 0.1

    def record_ended(self) -> None:
        """Record every ended attempt in one store transaction."""
        if self._ended:
            self._record(self._ended)
            for _, ending in self._ended:
                self.outcomes[ending.outcome] += 1
            self._ended.clear()

    def _record(self, ended: list[tuple[_InFlight, Ending]]) -> None:
        execution.record_many(
            self.app, [(flight.trigger, flight.claimed, ending) for flight, ending in ended]
        )

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for flight in self._inflight.values():
            if flight.is_overdue or now < flight.deadline:
                continue
            flight.is_overdue = True
            if not flight.is_settled:
                flight.is_settled = True
                timeout = flight.trigger.options.timeout
                ending = Ending(Outcome.TIMEOUT, f"timed out after {timeout} s")
                execution.record(self.app, flight.trigger, flight.claimed, ending)
                self.outcomes[Outcome.TIMEOUT] += 1
            if self.is_process:
                # A thread cannot be stopped (nor a cancelled coroutine that will not end):
                # this process stops, and its supervisor starts a fresh one.
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
        """Extend the lease of every delivery held here: queued, running or not yet recorded."""
        running = [f for f in self._inflight.values() if not f.is_settled]
        held = [c.lease for c in self._queue]
        held += [f.claimed.lease for f in running] + [f.claimed.lease for f, _ in self._ended]
        if not held:
            return
        now = self.app.clock.now()
        kept = set(self.app.store.renew(held, now, now + self.app.settings.lease))
        for flight in running:
            if flight.claimed.lease not in kept:
                flight.is_settled = True  # someone else owns it now; our result is discarded
                log.warning(
                    "%s lost the lease of delivery %d",
                    self.name,
                    flight.claimed.lease.delivery_id,
                    extra=self._extra(flight),
                )

    @staticmethod
    def _extra(flight: _InFlight) -> dict[str, object]:
        return {"delivery_id": flight.claimed.lease.delivery_id, "function": flight.trigger.name}

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
            if execution.record(self.app, trigger, item, ending):
                self.outcomes[Outcome.CRASHED] += 1
        return len(expired)

    # -- entry points ------------------------------------------------------------------

    def drain(self, delivery_ids: Sequence[int] | None = None) -> DrainSummary:
        """Run every delivery due now (and what becomes due meanwhile) until none is left."""
        self.maintain(force=True)
        while True:
            claimed = self.claim_and_start(delivery_ids)
            if not self.is_busy:
                if claimed == 0 and self.rescue() == 0 and not self.app.fire_due_schedules():
                    break
                continue
            self.collect(0.05)
        return self.summary()

    def run(self) -> None:
        """Serve until stop_requested is set (or an attempt is stuck), then shut down."""
        log.info("worker %s serving %d function(s)", self.name, len(self.functions))
        self._last_renew = self._last_sweep = -math.inf
        while not self.stop_requested.is_set() and not self.has_stuck_attempt:
            try:
                self.serve_once()
            except StoreError as exc:
                # A database restart must not end the worker: its leases outlive a short outage.
                log.error("worker %s: %s; trying again in %.0f s", self.name, exc, STORE_BACKOFF)
                self._pause(STORE_BACKOFF)
        if self.has_stuck_attempt:
            log.error("worker %s has an attempt it cannot stop: exiting", self.name)
        self.shutdown()
        log.info("worker %s stopped", self.name)

    def serve_once(self) -> None:
        """One turn of the loop: claim, renew and sweep when due, then wait for something."""
        claimed = self.claim_and_start()
        self.maintain()
        if self.is_busy:
            self.collect(0.02)
        elif claimed == 0:
            self.app.store.wait(self.app.settings.poll_interval)

    def _pause(self, seconds: float) -> None:
        # Short sleeps rather than Event.wait: a signal handler sets stop_requested, and
        # Event.set inside a handler could deadlock with an Event.wait in this thread.
        deadline = time.monotonic() + seconds
        while not self.stop_requested.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)

    def shutdown(self) -> None:
        """Let in-flight attempts finish within the grace period, then hand back the rest."""
        deadline = time.monotonic() + self.app.settings.shutdown_grace
        queued = [c.lease for c in self._queue]  # claimed here but never started
        self._queue.clear()
        while self._ended or any(not f.is_settled for f in self._inflight.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                self.collect(min(remaining, 0.1))
                self.record_ended()
                if time.monotonic() - self._last_renew >= self.app.settings.renew_every:
                    self._last_renew = time.monotonic()
                    self.renew()
            except StoreError as exc:
                log.error("worker %s: %s", self.name, exc)
                time.sleep(min(remaining, STORE_BACKOFF))
        leftovers = queued + [f.claimed.lease for f in self._inflight.values() if not f.is_settled]
        if leftovers:
            try:
                released = self.app.store.release(leftovers)
            except StoreError as exc:
                log.error(
                    "worker %s could not hand back %d delivery(ies) (%s): their leases will run "
                    "out and they will be retried",
                    self.name,
                    len(leftovers),
                    exc,
                )
            else:
                log.warning(
                    "worker %s handed back %d unfinished delivery(ies)", self.name, released
                )
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._loop is not None:
            self._loop.stop()

    def summary(self) -> DrainSummary:
        """Attempts run so far by outcome."""
        return DrainSummary(
            sum(self.outcomes.values()), {str(k): v for k, v in self.outcomes.items()}
        )
