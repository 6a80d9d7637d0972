"""The attempts a worker runs: started in threads (async ones on one event loop), collected
when they end, watched for their deadline.

The worker loop (worker.py) decides when; these do the work.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import socket
import threading
import time
import uuid
import weakref
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from oncefire.engine import crashes, endings, execution, leased_records
from oncefire.engine.execution import EventLoopThread
from oncefire.errors import StoreError
from oncefire.idempotency import Deferred, write_completions
from oncefire.retry import Outcome
from oncefire.stores.base import Ending, Lease, Leased

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import Collection, Mapping, Sequence

    from oncefire.engine.runtime import Runtime
    from oncefire.triggers import Trigger

log = logging.getLogger("oncefire.engine.worker")

# An async attempt past its timeout gets this much longer before the worker counts it as
# overdue, so that its own cancellation is written first; a sync one cannot be cancelled.
TIMEOUT_GRACE = 0.5


@dataclass(frozen=True, slots=True)
class DrainSummary:
    """What a drain ran: attempts by outcome."""

    attempts: int
    outcomes: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, outcome: str) -> int:
        return self.outcomes.get(outcome, 0)

    @classmethod
    def of(cls, outcomes: Mapping[str, int]) -> DrainSummary:
        """The summary of attempts counted by outcome."""
        return cls(sum(outcomes.values()), {str(k): v for k, v in outcomes.items()})


@dataclass(slots=True)
class RunningAttempt:
    """A delivery whose function runs on this worker."""

    leased: Leased
    trigger: Trigger
    # time.monotonic() when its function is due to end, and when it started: a sync attempt's
    # are set when a thread takes it (infinite and its admission time until then).
    deadline: float
    started: float
    # Set by the attempt's thread just before the function is called: from then on it may
    # have run (a worker confirms as started only attempts whose function was entered).
    entered: execution.Entry = field(default_factory=execution.Entry)
    is_settled: bool = False  # its result no longer counts: its lease was lost
    is_overdue: bool = False  # still running past its deadline: written when it ends
    is_done: bool = False  # its thread (or the event loop) has ended it: collected next
    held_until: float = -math.inf  # its lease's end as last renewed (the store's clock)

    def log_extra(self) -> dict[str, object]:
        """The fields a log line about this attempt carries."""
        return {"delivery_id": self.leased.lease.delivery_id, "function": self.trigger.name}


class RunningAttempts:
    """The attempts running on one worker, and those that ended but are not written yet."""

    def __init__(self, rt: Runtime, concurrency: int) -> None:
        self.rt = rt
        self.slots = concurrency
        self.running: dict[int, RunningAttempt] = {}  # by id(), those waiting for a thread included
        self.ended: list[tuple[RunningAttempt, Ending]] = []  # ended, not written yet
        self.first_ended_at = 0.0  # time.monotonic() when the oldest of `ended` ended
        self.mean_duration: float | None = None  # of recent attempts, in seconds
        # Ended attempts, with how (None: cancelled unstarted) and when they ended.
        self._done: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self._threads = AttemptThreads(rt, self._done, concurrency)
        self._loop: EventLoopThread | None = None  # started with the first async attempt

    def ended_items(self) -> list[tuple[Trigger, Leased, Ending]]:
        """What writing the ended attempts needs: (trigger, delivery, ending) each."""
        return [(attempt.trigger, attempt.leased, ending) for attempt, ending in self.ended]

    def ended_ids(self) -> set[int]:
        """The delivery ids of the ended attempts."""
        return {attempt.leased.lease.delivery_id for attempt, _ in self.ended}

    def has_room(self, item: Leased, waiting: int) -> bool:
        """Whether a leased delivery may start now: a slot is free, or its function is sync
        and fewer than `waiting` attempts wait for a thread. Short attempts waiting their turn
        let a thread go from one to the next without the loop handing each over (a wake-up
        each). None waits while an async attempt runs: the threads and the event loop share
        the slots, and the functions that run at once never outnumber them."""
        if len(self.running) < self.slots:
            return True
        is_async_running = len(self.running) > self._threads.busy
        if is_async_running or self.rt.triggers[item.function].is_async:
            return False
        return len(self.running) < self.slots + waiting

    def has_waiting(self) -> bool:
        """Whether a sync attempt waits for a thread (its clock not started)."""
        return any(math.isinf(f.deadline) for f in self.running.values())

    def take_waiting(self) -> list[RunningAttempt]:
        """Take back the sync attempts no thread has started: they never ran."""
        waiting = self._threads.take_waiting()
        self._threads.busy -= len(waiting)
        for attempt in waiting:
            del self.running[id(attempt)]
        return waiting

    def start(self, item: Leased) -> RunningAttempt:
        """Start the function of a leased delivery (marked started in the store): at once,
        or, sync, when a thread is free."""
        trigger = self.rt.triggers[item.function]
        started = time.monotonic()
        entered = execution.Entry(deferred=Deferred(item.acquired))
        if trigger.is_async:
            if self._loop is None:
                self._loop = EventLoopThread()
            deadline = started + trigger.options.timeout + TIMEOUT_GRACE
            attempt = RunningAttempt(item, trigger, deadline, started, entered)
            future = self._loop.submit(execution.run_async(self.rt, trigger, item, attempt.entered))
            # O(1) per attempt, unlike wait() on them all; the time is when it ended, not
            # when the loop came to look.
            future.add_done_callback(lambda f: self._done.put(async_done(attempt, f)))
        else:
            attempt = RunningAttempt(item, trigger, math.inf, started, entered)
            attempt.held_until = item.started_at + self.rt.settings.lease
            self._threads.run(attempt)
        self.running[id(attempt)] = attempt
        return attempt

    def collect(self, timeout: float) -> int:
        """Wait up to timeout for attempts to end and set them aside for writing; how many
        ended."""
        if not self.running:
            return 0
        done = []
        with suppress(queue.Empty):
            done.append(self._done.get(timeout=timeout))
            while True:
                done.append(self._done.get_nowait())
        self._release_untaken([attempt for attempt, _, _ in done])
        for attempt, outcome, finished in done:
            del self.running[id(attempt)]
            if not attempt.trigger.is_async:
                self._threads.busy -= 1
            if outcome is not None:
                self.learn(finished - attempt.started)
            if attempt.is_settled or outcome is None:
                # Its lease was lost: another worker owns the delivery now. The effects it had
                # are recorded all the same.
                self._complete_records(attempt)
                continue
            if crashes.PLANS and crashes.is_crashed(
                self.rt, attempt.trigger.name, attempt.leased.lease.delivery_id
            ):
                continue  # a test's crash_after_effect: nothing of it is written
            if not self.ended:
                self.first_ended_at = finished
            self.ended.append((attempt, ending_of(attempt, outcome)))
        return len(done)

    def _release_untaken(self, attempts: Sequence[RunningAttempt]) -> None:
        """Release the records acquired with the leases of attempts whose function was never
        called (too old, or cancelled before it started): their deliveries run again."""
        try:
            leased_records.release(self.rt, [f.entered.deferred.take_acquired() for f in attempts])
        except StoreError as exc:
            log.error("could not release the @idempotent records of unstarted attempts: %s", exc)

    def _complete_records(self, attempt: RunningAttempt) -> None:
        try:
            write_completions(self.rt, attempt.entered.deferred.take())
        except StoreError as exc:
            log.error("could not complete the @idempotent records of an attempt: %s", exc)

    def learn(self, duration: float) -> None:
        """Fold one attempt's duration into the recent mean."""
        if self.mean_duration is None:
            self.mean_duration = duration
        else:
            self.mean_duration += (duration - self.mean_duration) * 0.1

    def newly_overdue(self) -> list[RunningAttempt]:
        """Mark the attempts that just ran past their deadline overdue, and return them. They
        are not written yet: each keeps its lease and its max_instances slot until its thread
        ends, so its retry can never run beside it."""
        now = time.monotonic()
        late = [
            f
            for f in self.running.values()
            if not (f.is_overdue or f.is_settled) and now >= f.deadline
        ]
        for attempt in late:
            attempt.is_overdue = True
            log.warning(
                "%s attempt %d of event %s ran past its timeout of %s s",
                attempt.trigger.name,
                attempt.leased.attempt,
                attempt.leased.event.id,
                attempt.trigger.options.timeout,
                extra=attempt.log_extra(),
            )
        return late

    def live(self) -> list[RunningAttempt]:
        """The running attempts whose lease is still ours."""
        return [f for f in self.running.values() if not f.is_settled]

    def settle_lost(self, worker: str, kept: Collection[Lease], until: float) -> None:
        """Discard the results of running attempts whose lease is not among those kept:
        another worker owns their deliveries now. Those kept are held until `until`."""
        for attempt in self.live():
            if attempt.leased.lease in kept:
                attempt.held_until = until
            else:
                attempt.is_settled = True
                log.warning(
                    "%s lost the lease of delivery %d",
                    worker,
                    attempt.leased.lease.delivery_id,
                    extra=attempt.log_extra(),
                )

    def write_overdue(self, worker: str) -> None:
        """Write a timeout for each attempt still running past its deadline."""
        for attempt in [f for f in self.live() if f.is_overdue]:
            try:
                # The records it completed so far; one it completes later is written at once.
                completed = attempt.entered.deferred.take()
                ending = replace(timeout_ending(attempt.trigger), completions=completed)
                endings.write_ending(self.rt, attempt.trigger, attempt.leased, ending)
            except StoreError as exc:
                log.error("worker %s: %s; the lease will run out instead", worker, exc)

    def stop(self) -> None:
        """Stop starting attempts; threads still running are left to the process's exit, and
        the @idempotent records they complete are written at once (their endings may never
        be: their leases run out)."""
        for attempt in self.running.values():
            self._complete_records(attempt)
        self._threads.stop()
        if self._loop is not None:
            self._loop.stop()


def worker_name() -> str:
    """A name that tells which host and process holds a lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def timeout_ending(trigger: Trigger) -> Ending:
    """The ending of an attempt that ran past its timeout."""
    return Ending(Outcome.TIMEOUT, f"timed out after {trigger.options.timeout} s")


def ending_of(attempt: RunningAttempt, outcome: Ending | BaseException) -> Ending:
    """How an attempt ended (what its thread returned, or an error raised outside its
    function), with the @idempotent records it completed."""
    completed = attempt.entered.deferred.take()
    if attempt.is_overdue:
        # Recorded only now that its thread ended: its retry never overlaps it.
        ending = timeout_ending(attempt.trigger)
    elif isinstance(outcome, BaseException):  # a failed attempt, not a lost one
        ending = execution.outside_failure(outcome)
    else:
        ending = outcome
    return replace(ending, completions=completed) if completed else ending


# An attempt that ended: how (its ending, an error raised outside its function, or None if it
# was cancelled before it started) and when (time.monotonic()).
Done = tuple[RunningAttempt, Ending | BaseException | None, float]


def async_done(attempt: RunningAttempt, future: Future[Ending]) -> Done:
    """What the future of an async attempt that is done says of it."""
    attempt.is_done = True
    if future.cancelled():
        return attempt, None, time.monotonic()
    error = future.exception()
    return attempt, future.result() if error is None else error, time.monotonic()


class AttemptThreads:
    """The threads that run a worker's sync attempts, one at a time each, started as the
    running attempts need them, up to `most` (more wait for a thread). A thread takes an
    attempt from a queue and puts it, ended, on the worker's done queue: no future, lock or
    callback per attempt (a ThreadPoolExecutor makes all three for each; docs/performance.md).
    Daemon threads: one still running when the process exits is left to the exit; idle ones
    end with stop(), or once this object is gone."""

    def __init__(self, rt: Runtime, done: queue.SimpleQueue[Done], most: int) -> None:
        self.rt = rt
        self.most = most
        self.busy = 0  # attempts given to the threads and not collected yet
        self._done = done
        self._work: queue.SimpleQueue[RunningAttempt | None] = queue.SimpleQueue()
        self._count = 0  # threads started
        weakref.finalize(self, self._work.put, None)

    def run(self, attempt: RunningAttempt) -> None:
        """Run an attempt's function in a thread until it ends."""
        self.busy += 1
        # Each busy thread holds an attempt not collected yet.
        if self.busy > self._count and self._count < self.most:
            name = f"oncefire-attempt_{self._count}"
            args = (self.rt, self._work, self._done)
            threading.Thread(target=_serve, args=args, name=name, daemon=True).start()
            self._count += 1
        self._work.put(attempt)

    def take_waiting(self) -> list[RunningAttempt]:
        """Take the attempts no thread has started out of their queue."""
        waiting = []
        with suppress(queue.Empty):
            while (attempt := self._work.get_nowait()) is not None:
                waiting.append(attempt)
            self._work.put(None)  # taken with the attempts: passed on again
        return waiting

    def stop(self) -> None:
        """Cancel the attempts no thread has started, and let each thread end after the one
        it runs."""
        for attempt in self.take_waiting():
            self._done.put((attempt, None, time.monotonic()))
        self._work.put(None)


def _serve(
    rt: Runtime, work: queue.SimpleQueue[RunningAttempt | None], done: queue.SimpleQueue[Done]
) -> None:
    """An attempt thread: run the attempts it is given until told to end (by None, which it
    passes on to the next thread). An attempt's clock starts when a thread takes it; one whose
    lease was lost or ran out while it waited (its process stopped, say) is not run."""
    while (attempt := work.get()) is not None:
        if attempt.is_settled or rt.clock.now() >= attempt.held_until:
            attempt.is_done = True
            done.put((attempt, None, time.monotonic()))
            continue
        attempt.started = time.monotonic()
        attempt.deadline = attempt.started + attempt.trigger.options.timeout
        outcome: Ending | BaseException
        try:
            outcome = execution.run(rt, attempt.trigger, attempt.leased, attempt.entered)
        except BaseException as exc:  # outside the function: run() classifies its errors
            outcome = exc
        attempt.is_done = True
        done.put((attempt, outcome, time.monotonic()))
    work.put(None)


def write_all(
    rt: Runtime, worker: str, ended: Sequence[tuple[RunningAttempt, Ending]]
) -> Counter[str]:
    """Write ended attempts in one store transaction, or one at a time if that fails (one
    write the store refuses must not roll back its batch-mates' forever); the outcomes
    written."""
    items = [(attempt.trigger, attempt.leased, ending) for attempt, ending in ended]
    try:
        return endings.write_endings(rt, items)
    except Exception as exc:
        log.warning("worker %s writing one attempt at a time: %s", worker, exc)
        return endings.write_each(rt, items)
