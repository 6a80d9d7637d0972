"""A worker: leases due deliveries, runs them with bounded concurrency, renews their leases.

A delivery this worker holds moves through these states (the queue: turn.TurnState; running
and ended: attempts.RunningAttempts). Every lease held is renewed, queued ones included, so a
delivery never starts after its lease was lost and is never released while it may still run:

    queued            a turn's commit (or the lease itself) marks it -> marked started/ahead
    marked started    a slot is free                                 -> running
    marked ahead      a slot is free                                 -> running, unconfirmed
    marked ahead      no slot free, room to wait (short, sync)       -> waiting (thread)
    waiting (thread)  a thread takes it                              -> running, unconfirmed
    unconfirmed       its function entered, then a turn's commit     -> running (started)
    queued, marked    renewal or marking finds its lease lost        -> dropped (not ours now)
    queued, marked    waited RELEASE_AFTER, or the worker stops      -> released, uncounted
    waiting (thread)  waited RELEASE_AFTER, or the worker stops      -> released, uncounted
    running           it returns, raises or times out                -> ended
    running           renewal finds its lease lost                   -> settled (result dropped)
    ended             a turn's commit, within turn.WRITE_WITHIN      -> written: succeeded,
                                                                        pending(run_at) or dead
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from oncefire.engine import endings, leased_records, turn
from oncefire.engine.attempts import DrainSummary as DrainSummary
from oncefire.engine.attempts import RunningAttempts, worker_name, write_all
from oncefire.engine.progress import Progress
from oncefire.engine.rescue import release_unstarted
from oncefire.engine.rescue import rescue as rescue_expired
from oncefire.engine.routing import Housekeeping
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
# A queued delivery that waited this long for a slot is released for another worker to run.
RELEASE_AFTER = 1.0


class Worker:
    """Runs a Runtime's deliveries in this process; drain() for scripts, run() for service.

    Each turn of the loop is at most one store transaction (turn.plan decides what it does):
    it writes the attempts that ended, leases a batch once the queue is empty, and marks
    started what the free slots take next, with more marked ahead; so a batch costs a few
    commits, not two per delivery.
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
        self.state = turn.TurnState()  # leased, not started yet; unconfirmed attempts
        self.attempts = RunningAttempts(rt, self.concurrency)
        self._caps = {
            name: t.options.max_instances
            for name, t in rt.triggers.items()
            if t.options.max_instances is not None and name in self.functions
        }
        self._rates = rt.rate_limits(self.functions)
        self._last_renew = self._last_sweep = time.monotonic()
        self.has_stuck_attempt = False
        # Routing, last seen, retention; its budgets: paused functions, budget caps.
        self.housekeeping = Housekeeping(rt, self.functions)
        self.progress = Progress(rt, f"worker {self.name}", self.functions)

    # -- the loop ----------------------------------------------------------------------

    @property
    def is_busy(self) -> bool:
        """Whether anything is leased here and not yet written."""
        return bool(self.state.queue or self.attempts.running or self.attempts.ended)

    def lease_and_start(self, delivery_ids: Sequence[int] | None = None) -> int:
        """Write the attempts that ended, lease more once the local queue is empty, and mark
        started what the free slots will take, in one store transaction; then start those.
        How many were leased."""
        self.release_stale()
        state, attempts = self.state, self.attempts
        # A solo delivery that ended is written in this turn (the queue is empty).
        state.is_solo_held = state.is_solo_held and bool(state.queue or attempts.running)
        running = len(attempts.running)
        # Beyond the free slots, short sync attempts wait for a thread (has_room); the next
        # batch is leased once fewer wait, so the threads run on through its turn (while they
        # move: none is leased to wait behind an attempt that runs long).
        waiting = turn.waiting_count(self.concurrency, attempts.mean_duration, self.batch_size)
        plan = turn.plan(
            free=max(0, self.concurrency - running),
            running=running,
            concurrency=self.concurrency,
            waiting=waiting,
            state=state,
            may_lease=not (self.stop_requested.is_set() or self.has_stuck_attempt),
            ended=len(attempts.ended),
            ended_for=time.monotonic() - attempts.first_ended_at,
            batch_size=self.batch_size,
        )
        leased: list[Leased] = []
        if plan:
            leased = self._store_turn(delivery_ids, plan)
            if plan.is_leasing:
                state.has_moved = False
        state.start_marked(attempts, waiting)
        return len(leased)

    def _store_turn(self, delivery_ids: Sequence[int] | None, plan: turn.Plan) -> list[Leased]:
        state, attempts = self.state, self.attempts
        taken: list[Taken] = []
        early: list[Leased] | None = None  # their events read in the turn: records acquired
        written: Counter[str] = Counter()
        try:
            with self.rt.store.batch():  # one commit: a disk flush saved per turn
                if plan.is_writing:
                    written = endings.write_endings(self.rt, attempts.ended_items())
                if plan.is_leasing:
                    # Alone once this turn wrote what ended: it may take a solo delivery.
                    is_alone = not attempts.running and (plan.is_writing or not attempts.ended)
                    taken = self._take_due(delivery_ids, is_alone, plan.free)
                    early = leased_records.acquire(self.rt, taken)
                _, lease_ahead = turn.marked_by_lease(taken, plan.free)
                marks = self._marks(plan.free) if plan.is_marking else None  # a lease marks itself
                # Committed before the functions start: only a delivery marked started (not
                # ahead) counts as a crashed attempt when its worker dies.
                now = self.rt.clock.now()
                marked, ahead = turn.mark(self.rt.store, marks, now) if marks else (set(), set())
                writing = attempts.ended_ids() if plan.is_writing else set()  # no confirming
                confirmed = state.confirm(self.rt.store, writing, now)
        except Exception as exc:
            if not plan.is_writing:
                raise
            # One write the store refuses must not roll back its batch-mates' forever.
            log.warning("worker %s writing one attempt at a time: %s", self.name, exc)
            self._count_written(endings.write_each(self.rt, attempts.ended_items()))
            return []
        if plan.is_writing:
            self._count_written(written)
        state.settle_unconfirmed(confirmed, attempts.running.values())
        try:  # read after the commit: SQLite's write lock is not held meanwhile
            leased = self.rt.store.with_events(taken) if early is None else early
        except Exception:
            release_unstarted(self.rt, self.name, [t.lease for t in taken])
            raise
        if leased:
            state.add(leased, lease_ahead)
        state.record_marks(marked, ahead)
        lost = (marks.ids() if marks else set()) - marked
        if lost:
            log.warning("%s lost the lease of %d queued delivery(ies)", self.name, len(lost))
            state.drop(lost)
        return leased

    def _marks(self, free: int) -> turn.Marks:
        """What to mark of the queue in this turn: the next free slots plus about PREFETCH
        seconds of work more, so short attempts share a start commit."""
        ahead = turn.ahead_count(self.concurrency, self.attempts.mean_duration)
        return self.state.marks_for(free, ahead)

    def _take_due(
        self, delivery_ids: Sequence[int] | None, is_alone: bool = False, free: int = 0
    ) -> list[Taken]:
        now = self.rt.clock.now()
        functions = self.housekeeping.leasable(self.functions)
        running, mean = len(self.attempts.running), self.attempts.mean_duration
        return self.rt.store.take_due(
            worker=self.name,
            now=now,
            lease_until=now + self.rt.settings.lease,
            limit=turn.lease_limit(running, self.concurrency, mean, self.batch_size),
            functions=functions,
            caps=self.housekeeping.budgets.caps(functions, self._caps),
            delivery_ids=delivery_ids,
            rates=self._rates,
            is_alone=is_alone,
            is_ahead=True,  # the next turn's commit confirms those that started since
            free=free,
        )

    def release_stale(self) -> None:
        """Release, uncounted, what waited RELEASE_AFTER since its lease, queued or for a
        thread (behind an attempt that ran long): an idle process runs it."""
        if time.monotonic() - self.state.queued_at >= RELEASE_AFTER and (
            self.state.queue or self.attempts.has_waiting()
        ):
            self._release_queue()

    def collect(self, timeout: float) -> int:
        """Wait up to timeout for attempts to end and set them aside for writing; how
        many ended. An attempt past its timeout makes a worker process stop (its supervisor
        starts a fresh one): a thread cannot be stopped."""
        ended = self.attempts.collect(timeout)
        self.state.has_moved = self.state.has_moved or ended > 0
        if self.attempts.newly_overdue() and self.is_process:
            self.has_stuck_attempt = True
        return ended

    def write_ended(self) -> None:
        """Write every ended attempt in one store transaction (one at a time if that fails)."""
        if self.attempts.ended:
            self._count_written(write_all(self.rt, self.name, self.attempts.ended))

    def _count_written(self, written: Counter[str]) -> None:
        # A summary counts what the store wrote: not a result whose lease was lost.
        self.outcomes.update(written)
        self.attempts.ended.clear()

    def write_overdue(self) -> None:
        """Write a timeout for each attempt still running past its deadline: the last thing a
        process does before it exits, so the retry cannot start while the thread lives."""
        self.attempts.write_overdue(self.name)

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
            self.housekeeping.tick()
            check_alerts(self.rt, self.rt.clock.now())
        self.housekeeping.catch_up()  # a purge behind retention steps again before the next sweep
        self.progress.tick(sum(self.outcomes.values()))

    def renew(self) -> None:
        """Extend the lease of every delivery held here: queued, running or not yet written.
        A queued delivery whose lease was lost is dropped before it starts."""
        state, attempts = self.state, self.attempts
        held = state.leases() + [a.leased.lease for a in attempts.live()]
        held += [a.leased.lease for a, _ in attempts.ended]
        if not held:
            return
        now = self.rt.clock.now()
        # An attempt marked ahead that runs on counts if lost, once its function is entered.
        confirmed = state.confirm(self.rt.store, (), now)
        state.settle_unconfirmed(confirmed, attempts.running.values())
        kept = set(self.rt.store.renew(held, now, now + self.rt.settings.lease))
        lost = {c.lease.delivery_id for c in state.queue if c.lease not in kept}
        if lost:
            state.drop(lost)
            log.warning("%s lost the lease of %d queued delivery(ies)", self.name, len(lost))
        attempts.settle_lost(self.name, kept, now + self.rt.settings.lease)

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
        self.housekeeping.warn_unserved(is_process=self.is_process)
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
        """Release the queued deliveries, then let running attempts finish within the grace
        period. One still running then keeps its lease: written if it ends, or counted as
        crashed once its lease runs out (its process gone). An overdue attempt is not waited
        for; a stuck process exits, and write_overdue() writes it on the way out."""
        deadline = time.monotonic() + self.rt.settings.shutdown_grace
        self._release_queue()
        while self.attempts.ended or any(not a.is_overdue for a in self.attempts.live()):
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
        running = [a for a in self.attempts.live() if not a.is_overdue]
        if running:
            log.warning(
                "worker %s stops with %d attempt(s) still running: their leases will run out "
                "and they will count as crashed",
                self.name,
                len(running),
            )
        self.attempts.stop()

    def _release_queue(self) -> None:
        # Leased here but never started: queued, or waiting for a thread.
        queued = [*self.state.take_all(), *(a.leased for a in self.attempts.take_waiting())]
        release_unstarted(self.rt, self.name, [c.lease for c in queued])  # first: never raises
        leased_records.release(self.rt, [c.acquired for c in queued])  # by token: safe after it

    def summary(self) -> DrainSummary:
        """Attempts run so far by outcome."""
        return DrainSummary.of(self.outcomes)
