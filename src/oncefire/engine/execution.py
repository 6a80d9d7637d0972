"""One attempt: build the event a function sees, run it, classify how it ended (endings.py
writes it)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import traceback
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from oncefire.engine.attempt_event import build_event as build_event
from oncefire.engine.runtime import CURRENT_RUNTIME
from oncefire.errors import (
    PermanentError,
    RecordHeldError,
    Retry,
    UndecodablePayloadError,
)
from oncefire.events import CURRENT_APP, CURRENT_EVENT, Event
from oncefire.features.usage import CURRENT_OPS, StoreOps
from oncefire.idempotency import DEFERRED, Deferred
from oncefire.model import lineage
from oncefire.model.fencing import Holding
from oncefire.retry import Outcome
from oncefire.stores.base import Ending, Leased

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime
    from oncefire.triggers import Trigger

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 4000


def storable(text: str | None) -> str | None:
    """Text every store can hold: lone surrogates become U+FFFD and NUL is written as \\x00."""
    if text is None:
        return None
    clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return clean.replace("\x00", "\\x00")


def describe(exc: BaseException) -> str:
    """The error text of an attempt: type, message and the end of the traceback, capped."""
    head = f"{type(exc).__name__}: {exc}"
    tail = "".join(traceback.format_exception(exc)[-6:])
    text = head if not tail else f"{head}\n{tail}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def classify(trigger: Trigger, exc: BaseException) -> Ending:
    """Map an exception raised by a function to an attempt outcome."""
    if isinstance(exc, Retry | RecordHeldError):  # transient even if permanent_errors match
        return Ending(Outcome.FAILED, describe(exc), exc.delay)
    if isinstance(exc, (PermanentError, *trigger.options.permanent_errors)):
        return Ending(Outcome.PERMANENT, describe(exc))
    return Ending(Outcome.FAILED, describe(exc))


@dataclass(slots=True)
class Entry:
    """What an attempt's thread tells its worker: whether the function was called (set just
    before the call: a plain attribute, written once, atomic under the GIL), and the
    @idempotent records it completed, written with its ending."""

    is_entered: bool = False
    deferred: Deferred = field(default_factory=Deferred)


def call(
    rt: Runtime,
    trigger: Trigger,
    event: Event,
    entered: Entry | None = None,
    started_at: float | None = None,
) -> Ending:
    """Run the function once in this thread (an async one on a loop of its own); `entered` is
    set just before the function is called. The ending carries its start and end times."""
    if trigger.is_async:
        ending = asyncio.run(call_async(rt, trigger, event, entered))
        return replace(ending, started_at=started_at, finished_at=rt.clock.now())
    token = CURRENT_EVENT.set(event)
    app_token = CURRENT_APP.set(rt.app)
    rt_token = CURRENT_RUNTIME.set(rt)
    deferred_token = DEFERRED.set(None if entered is None else entered.deferred)
    ops = StoreOps()
    ops_token = CURRENT_OPS.set(ops)
    # CPU time of this thread only: what the function itself burned, not the worker's.
    cpu_start = time.thread_time()
    if entered is not None:
        entered.is_entered = True
    failed: Ending | None = None
    try:
        trigger.fn(event)
    except BaseException as exc:
        failed = classify(trigger, exc)
    finally:
        CURRENT_EVENT.reset(token)
        CURRENT_APP.reset(app_token)
        CURRENT_RUNTIME.reset(rt_token)
        DEFERRED.reset(deferred_token)
        CURRENT_OPS.reset(ops_token)
    cpu = time.thread_time() - cpu_start
    finished_at = rt.clock.now()
    if failed is not None:
        return replace(
            failed,
            started_at=started_at,
            finished_at=finished_at,
            cpu_seconds=cpu,
            reads=ops.reads,
            writes=ops.writes,
        )
    # Built once, not copied with dataclasses.replace (docs/performance.md, the worker's turn).
    return Ending(
        Outcome.SUCCEEDED,
        started_at=started_at,
        finished_at=finished_at,
        cpu_seconds=cpu,
        reads=ops.reads,
        writes=ops.writes,
    )


async def call_async(
    rt: Runtime, trigger: Trigger, event: Event, entered: Entry | None = None
) -> Ending:
    """Await an async function once, cancelling it when it runs past its timeout; `entered` is
    set just before it is awaited."""
    # Each task runs in a copy of the context, so these settings stay with this attempt.
    CURRENT_EVENT.set(event)
    CURRENT_APP.set(rt.app)
    CURRENT_RUNTIME.set(rt)
    DEFERRED.set(None if entered is None else entered.deferred)
    ops = StoreOps()
    CURRENT_OPS.set(ops)
    if entered is not None:
        entered.is_entered = True
    return replace(await _await(trigger, event), reads=ops.reads, writes=ops.writes)


async def _await(trigger: Trigger, event: Event) -> Ending:
    """The ending of one await of an async function, within its timeout."""
    timer = asyncio.timeout(trigger.options.timeout)
    try:
        async with timer:
            await trigger.fn(event)
    except TimeoutError as exc:
        if timer.expired():
            return Ending(Outcome.TIMEOUT, f"timed out after {trigger.options.timeout} s")
        return classify(trigger, exc)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the worker is shutting down and handed this delivery back
        return classify(trigger, exc)
    except BaseException as exc:
        return classify(trigger, exc)
    return Ending(Outcome.SUCCEEDED)


class EventLoopThread:
    """One event loop in its own thread, shared by a worker's async functions."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="oncefire-loop", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, Ending]) -> concurrent.futures.Future[Ending]:
        """Schedule a coroutine on the loop; its result arrives in a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            # What is still running was released: cancel it, then close cleanly.
            tasks = asyncio.all_tasks(self.loop)
            for task in tasks:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop, cancelling what still runs; give up waiting after timeout."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error(
                "the event loop did not stop within %.0f s: an async function blocks it", timeout
            )


def expiry_error(trigger: Trigger, leased: Leased) -> str | None:
    """Why a delivery is too old to run (max_event_age), or None."""
    limit = trigger.options.max_event_age
    # A person's replay of a dead letter gives the event a fresh allowance.
    age = leased.started_at - max(leased.event.time, leased.replayed_at or 0.0)
    if limit is not None and age > limit:
        return (
            f"event expired: {age:.1f} s old at attempt {leased.attempt}, max_event_age {limit} s"
        )
    return None


def prepare(rt: Runtime, trigger: Trigger, leased: Leased) -> Ending | tuple[float, Event]:
    """(start time, event) of an attempt, or the ending of one that cannot start: too old
    (max_event_age), or an error outside the function, a failed attempt with its cause."""
    try:
        expired = expiry_error(trigger, leased)
        if expired is not None:
            return Ending(Outcome.EXPIRED, expired)
        return rt.clock.now(), build_event(trigger, leased)
    except UndecodablePayloadError as exc:  # the same bytes will never decode: no retry
        return Ending(Outcome.PERMANENT, describe(exc))
    except Exception as exc:
        return outside_failure(exc)


def run(rt: Runtime, trigger: Trigger, leased: Leased, entered: Entry | None = None) -> Ending:
    """Run one leased delivery to its end (expiry checked first); the caller writes it.
    `entered` is set once the function is called (from then on it may have run)."""
    prepared = prepare(rt, trigger, leased)
    if isinstance(prepared, Ending):
        return prepared
    started_at, event = prepared
    with lineage.Running(leased.event, rt.settings.max_event_depth), Holding(leased.lease):
        return call(rt, trigger, event, entered, started_at)


async def run_async(
    rt: Runtime, trigger: Trigger, leased: Leased, entered: Entry | None = None
) -> Ending:
    """run() for an async function, on the worker's event loop."""
    prepared = prepare(rt, trigger, leased)
    if isinstance(prepared, Ending):
        return prepared
    started_at, event = prepared
    with lineage.Running(leased.event, rt.settings.max_event_depth), Holding(leased.lease):
        ending = await call_async(rt, trigger, event, entered)
    return replace(ending, started_at=started_at, finished_at=rt.clock.now())


def outside_failure(exc: BaseException) -> Ending:
    """A failed attempt for an error raised outside the function (building its event)."""
    return Ending(Outcome.FAILED, f"oncefire could not run the function: {describe(exc)}")
