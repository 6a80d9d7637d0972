"""A worker: leases due deliveries, runs them with bounded concurrency, renews their leases.

Each delivery a worker holds is queued (`_queue`: leased, maybe marked), running
(`flights.running`: a short sync one may first wait there for a thread), ended
(`flights.ended`: within WRITE_WITHIN, written in one batch), then written; docs/workers.md
("The states of a delivery inside a worker") has every transition. Every held lease is
renewed, queued ones included, so a delivery never starts after its lease was lost and is
never handed back while its function may still run.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter, deque
from itertools import islice
from typing import TYPE_CHECKING

from oncefire.engine import execution, leased_records, turn
from oncefire.engine.attempts import DrainSummary as DrainSummary
from oncefire.engine.attempts import Flight, Flights, worker_name, write_all
from oncefire.engine.progress import Progress
from oncefire.engine.rescue import hand_back
from oncefire.engine.rescue import rescue as rescue_expired
from oncefire.engine.routing import Keeper
from oncefire.errors import StoreError
from oncefire.features import ticks, ttl
from oncefire.features.alerts import check_alerts
from oncefire.model.rates import idle_wait
from oncefire.retry import Outcome
from oncefire.stores.base import Leased, Taken

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oncefire.engine.runtime import Runtime

log = logging.getLogger(__name__)

# How long the loop pauses after the store failed (a database restart) before trying again.
STORE_BACKOFF = 1.0
# An ended attempt is written within this many seconds, whatever else runs.
WRITE_WITHIN = 0.05
# A queued delivery that waited this long for a slot is handed back for another worker to run.
HAND_BACK_AFTER = 1.0


class Worker:
    """Runs a Runtime's deliveries in this process; drain() for scripts, run() for service.

    Each turn of the loop is at most one store transaction: it writes the attempts that
    ended, leases a batch once the queue is empty, and marks started the deliveries the free
    slots will take, and a wave ahead (turn.py); with a durable commit costing a disk flush,
    a few flushes per batch instead of two per delivery.
    """

    def __init__(
        self,
        rt: Runtime,
        *,
        concurrency: int | None = None,
        functions: Sequence[str] | None = None,
        is_process: bool = False,
    ) -> None:
        self.rt = rt
        self.name = worker_name()
        self.concurrency = concurrency or rt.settings.concurrency
        self.batch_size = max(rt.settings.batch_size, self.concurrency)
        # HTTP functions run in the HTTP server, which leases their deliveries by id.
        self.functions = list(
            functions or [name for name, t in rt.triggers.items() if t.kind.is_run_by_workers]
        )
        # An attempt that cannot be stopped ends the process (its supervisor starts another).
        self.is_process = is_process
        self.stop_requested = threading.Event()
        self.outcomes: Counter[str] = Counter()
        self._queue: deque[Leased] = deque()  # leased, not started yet
        self._queued_at = time.monotonic()  # when the last lease filled the queue
        self._marked: set[int] = set()  # ids of queued deliveries already marked started
        self._ahead: set[int] = set()  # those of them marked ahead (turn.py)
        self._unconfirmed: list[Flight] = []  # started here while marked ahead
        self._is_solo_held = False  # a solo delivery is held: nothing else is leased
        self._has_moved = False  # an attempt ended since the last lease
        self.flights = Flights(rt, self.concurrency)
        self._caps = {
            name: t.options.max_instances
            for name, t in rt.triggers.items()
            if t.options.max_instances is not None and name in self.functions
        }
        self._rates = rt.rate_limits(self.functions)
        self._last_renew = self._last_sweep = time.monotonic()
        self.has_stuck_attempt = False
        self.keeper = Keeper(rt, self.functions)  # routing, last seen; brake: paused, budgets
        self.progress = Progress(rt, f"worker {self.name}", self.functions)

    # -- the loop ----------------------------------------------------------------------

    @property
    def is_busy(self) -> bool:
        """Whether anything is leased here and not yet written."""
        return bool(self._queue or self.flights.running or self.flights.ended)

    def lease_and_start(self, delivery_ids: Sequence[int] | None = None) -> int:
        """Write the attempts that ended, lease more once the local queue is empty, and mark
        started what the free slots will take, in one store transaction; then start those.
        How many were leased."""
        self.hand_back_stale()
        # A solo delivery that ended is written in this turn (the queue is empty).
        self._is_solo_held = self._is_solo_held and bool(self._queue or self.flights.running)
        running = len(self.flights.running)
        free = max(0, self.concurrency - running)
        # Beyond the free slots, short sync attempts wait for a thread (Flights.has_room); the
        # next batch is leased once fewer wait, so the threads run on through its turn (while
        # they move: none is leased to wait behind an attempt that runs long).
        waiting = turn.waiting_count(self.concurrency, self.flights.mean_duration, self.batch_size)
        can_lease = (
            not self._queue
            and (free > 0 or (self._has_moved and running < self.concurrency + waiting))
            and not self.stop_requested.is_set()
            and not self.has_stuck_attempt
            and not self._is_solo_held
        )
        # A turn commits when the next queued delivery to start is not marked yet (turn.py).
        is_marking = any(c.lease.delivery_id not in self._marked for c in islice(self._queue, free))
        must_write = bool(self.flights.ended) and (
            is_marking
            or can_lease  # a commit happens anyway
            or len(self.flights.ended) >= self.batch_size
            or time.monotonic() - self.flights.first_ended_at >= WRITE_WITHIN
        )
        leased: list[Leased] = []
        if must_write or can_lease or is_marking:
            leased = self._store_turn(delivery_ids, free, must_write, can_lease, is_marking)
            self._has_moved = self._has_moved and not can_lease
        while self._queue and self.flights.has_room(self._queue[0], waiting):
            if self._queue[0].lease.delivery_id not in self._marked:
                break  # marked in the next turn
            item = self._queue.popleft()
            self._marked.discard(item.lease.delivery_id)
            flight = self.flights.start(item)
            if item.lease.delivery_id in self._ahead:
                self._ahead.discard(item.lease.delivery_id)
                self._unconfirmed.append(flight)  # confirmed by a commit once entered
        return len(leased)

    def _store_turn(
        self,
        delivery_ids: Sequence[int] | None,
        free: int,
        must_write: bool,
        can_lease: bool,
        is_marking: bool,
    ) -> list[Leased]:
        taken: list[Taken] = []
        early: list[Leased] | None = None  # their events read in the turn: records acquired
        written: Counter[str] = Counter()
        try:
            with self.rt.store.batch():  # one commit: a disk flush saved per turn
                if must_write:
                    written = execution.write_endings(self.rt, self.flights.ended_items())
                if can_lease:
                    # Alone once this turn written what ended: it may take a solo delivery.
                    is_alone = not self.flights.running and (must_write or not self.flights.ended)
                    taken = self._take_due(delivery_ids, is_alone, free)
                    early = leased_records.acquire(self.rt, taken)
                leased_ids, lease_ahead = turn.marked_by_lease(taken, free)
                marks = self._plan(free) if is_marking else None  # a lease marks itself
                # Committed before the functions start: only a delivery marked started (not
                # ahead) is charged an attempt when its worker dies.
                now = self.rt.clock.now()
                marked, ahead = turn.mark(self.rt.store, marks, now) if marks else (set(), set())
                writing = self.flights.ended_ids() if must_write else set()  # no confirming
                confirmed = turn.confirm(self.rt.store, self._unconfirmed, writing, now)
        except Exception as exc:
            if not must_write:
                raise
            # One write the store refuses must not roll back its batch-mates' forever.
            log.warning("worker %s writing one attempt at a time: %s", self.name, exc)
            self._count_written(execution.write_each(self.rt, self.flights.ended_items()))
            return []
        if must_write:
            self._count_written(written)
        running = self.flights.running.values()
        self._unconfirmed = turn.unconfirmed(self._unconfirmed, confirmed, running)
        try:  # read after the commit: SQLite's write lock is not held meanwhile
            leased = self.rt.store.with_events(taken) if early is None else early
        except Exception:
            hand_back(self.rt, self.name, [t.lease for t in taken])
            raise
        if leased:
            self._queued_at = time.monotonic()
            self._queue.extend(leased)
            self._is_solo_held = leased[0].is_solo  # a solo delivery is leased alone
        self._marked |= marked | leased_ids
        self._ahead = (self._ahead - marked) | ahead | (lease_ahead - marked)
        lost = (marks.ids() if marks else set()) - marked
        if lost:
            log.warning("%s lost the lease of %d queued delivery(ies)", self.name, len(lost))
            self._queue = deque(c for c in self._queue if c.lease.delivery_id not in lost)
        return leased

    def _plan(self, free: int) -> turn.Marking:
        """What to mark of the queue in this turn: the next free slots plus about PREFETCH
        seconds of work more, so that short attempts cost a start commit a wave, not one a
        slot."""
        ahead = turn.ahead_count(self.concurrency, self.flights.mean_duration)
        return turn.plan(list(self._queue), free, ahead, self._marked)

    def _take_due(
        self, delivery_ids: Sequence[int] | None, is_alone: bool = False, free: int = 0
    ) -> list[Taken]:
        now = self.rt.clock.now()
        functions = self.keeper.leasable(self.functions)
        running, mean = len(self.flights.running), self.flights.mean_duration
        return self.rt.store.take_due(
            worker=self.name,
            now=now,
            lease_until=now + self.rt.settings.lease,
            limit=turn.lease_limit(running, self.concurrency, mean, self.batch_size),
            functions=functions,
            caps=self.keeper.brake.caps(functions, self._caps),
            delivery_ids=delivery_ids,
            rates=self._rates,
            is_alone=is_alone,
            is_ahead=True,  # the next turn's commit confirms those that started since
            free=free,
        )

    def hand_back_stale(self) -> None:
        """Hand back, uncounted, what waited HAND_BACK_AFTER since its lease, queued or for a
        thread (behind an attempt that ran long): an idle process runs it."""
        if time.monotonic() - self._queued_at >= HAND_BACK_AFTER and (
            self._queue or self.flights.has_waiting()
        ):
            self._hand_back_queue()

    def collect(self, timeout: float) -> int:
        """Wait up to timeout for attempts to end and set them aside for writing; how
        many ended. An attempt past its timeout makes a worker process stop (its supervisor
        starts a fresh one): a thread cannot be stopped."""
        ended = self.flights.collect(timeout)
        self._has_moved = self._has_moved or ended > 0
        if self.flights.newly_overdue() and self.is_process:
            self.has_stuck_attempt = True
        return ended

    def write_ended(self) -> None:
        """Write every ended attempt in one store transaction (one at a time if that fails)."""
        if self.flights.ended:
            self._count_written(write_all(self.rt, self.name, self.flights.ended))

    def _count_written(self, written: Counter[str]) -> None:
        # A summary counts what the store wrote: not a result whose lease was lost.
        self.outcomes.update(written)
        self.flights.ended.clear()

    def write_overdue(self) -> None:
        """Write a timeout for each attempt still running past its deadline: the last thing a
        process does before it exits, so the retry cannot start while the thread lives."""
        self.flights.write_overdue(self.name)

    def maintain(self, *, force: bool = False) -> None:
        """Fire due schedule ticks, renew our leases, rescue dead workers' deliveries, when due."""
        settings = self.rt.settings
        mono = time.monotonic()
        if force or mono - self._last_renew >= settings.renew_every:
            self._last_renew = mono
            self.renew()
        ticks.fire_due(self.rt)  # at each turn: a tick fires within a second of its time
        if force or mono - self._last_sweep >= settings.sweep_every:
            self._last_sweep = mono
            self.rescue()
            ttl.sweep(self.rt)
            self.keeper.tick()
            check_alerts(self.rt, self.rt.clock.now())
        self.keeper.catch_up()  # a purge behind retention steps again before the next sweep
        self.progress.tick(sum(self.outcomes.values()))

    def renew(self) -> None:
        """Extend the lease of every delivery held here: queued, running or not yet written.
        A queued delivery whose lease was lost is dropped before it starts."""
        held = [c.lease for c in self._queue] + [f.leased.lease for f in self.flights.live()]
        held += [f.leased.lease for f, _ in self.flights.ended]
        if not held:
            return
        now = self.rt.clock.now()
        # An attempt marked ahead that runs on is charged if lost, once its function is entered.
        confirmed = turn.confirm(self.rt.store, self._unconfirmed, (), now)
        running = self.flights.running.values()
        self._unconfirmed = turn.unconfirmed(self._unconfirmed, confirmed, running)
        kept = set(self.rt.store.renew(held, now, now + self.rt.settings.lease))
        lost = [c for c in self._queue if c.lease not in kept]
        if lost:
            self._queue = deque(c for c in self._queue if c.lease in kept)
            self._marked -= {c.lease.delivery_id for c in lost}
            log.warning("%s lost the lease of %d queued delivery(ies)", self.name, len(lost))
        self.flights.settle_lost(self.name, kept, now + self.rt.settings.lease)

    def rescue(self) -> int:
        """Rescue the deliveries of stopped workers (rescue.py); how many leases had run out."""
        expired, crashed = rescue_expired(self.rt, self.functions)
        if crashed:  # a summary lists only the outcomes that happened
            self.outcomes[Outcome.CRASHED] += crashed
        return expired

    # -- entry points ------------------------------------------------------------------

    def drain(self, delivery_ids: Sequence[int] | None = None) -> DrainSummary:
        """Run every delivery due now (and what becomes due meanwhile) until none is left."""
        self.maintain(force=True)
        while True:
            leased = self.lease_and_start(delivery_ids)
            if not self.is_busy:
                if leased == 0 and self.rescue() == 0 and not ticks.fire_due(self.rt):
                    break
                continue
            # Renew and sweep while busy too: an attempt longer than the lease keeps it.
            self.maintain()
            self.collect(0.02)
        return self.summary()

    def run(self) -> None:
        """Serve until stop_requested is set (or an attempt is stuck), then shut down."""
        log.info("worker %s serving %d function(s)", self.name, len(self.functions))
        self.keeper.warn_unserved(is_process=self.is_process)
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
        """One turn of the loop: lease, renew and sweep when due, then wait for something."""
        leased = self.lease_and_start()
        self.maintain()
        if self.is_busy:
            self.collect(0.02)
        elif leased == 0:
            tokens = self.rt.store.rate_tokens(self._rates, self.rt.clock.now())
            self.rt.store.wait(idle_wait(ticks.poll_interval(self.rt), self._rates, tokens))

    def _pause(self, seconds: float) -> None:
        # Short sleeps rather than Event.wait: a signal handler sets stop_requested, and
        # Event.set inside a handler could deadlock with an Event.wait in this thread.
        deadline = time.monotonic() + seconds
        while not self.stop_requested.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)

    def shutdown(self) -> None:
        """Hand back the queued deliveries, then let running attempts finish within the grace
        period. One still running then keeps its lease: written if it ends, or counted as
        crashed once its lease runs out (its process gone). An overdue attempt is not waited
        for; a stuck process exits, and write_overdue() writes it on the way out."""
        deadline = time.monotonic() + self.rt.settings.shutdown_grace
        self._hand_back_queue()
        while self.flights.ended or any(not f.is_overdue for f in self.flights.live()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                self.collect(min(remaining, 0.1))
                self.write_ended()
                if time.monotonic() - self._last_renew >= self.rt.settings.renew_every:
                    self._last_renew = time.monotonic()
                    self.renew()
            except StoreError as exc:
                log.error("worker %s: %s", self.name, exc)
                time.sleep(min(remaining, STORE_BACKOFF))
        running = [f for f in self.flights.live() if not f.is_overdue]
        if running:
            log.warning(
                "worker %s stops with %d attempt(s) still running: their leases will run out "
                "and they will count as crashed",
                self.name,
                len(running),
            )
        self.flights.stop()

    def _hand_back_queue(self) -> None:
        # Leased here but never started: queued, or waiting for a thread.
        queued = [*self._queue, *(f.leased for f in self.flights.take_waiting())]
        self._queue.clear()
        self._marked.clear()
        self._ahead.clear()
        hand_back(self.rt, self.name, [c.lease for c in queued])  # first: it never raises
        leased_records.release(self.rt, [c.acquired for c in queued])  # by token: safe after it

    def summary(self) -> DrainSummary:
        """Attempts run so far by outcome."""
        return DrainSummary.of(self.outcomes)
