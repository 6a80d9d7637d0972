"""One attempt: build the event a function sees, run it, classify how it ended, record it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import traceback
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from oncefire import codec
from oncefire.clock import to_datetime
from oncefire.errors import ClaimHeldError, PermanentError, Retry
from oncefire.events import CURRENT_APP, CURRENT_EVENT, Event, view_of
from oncefire.retry import Outcome, decide
from oncefire.stores.base import AttemptResult, Claimed

if TYPE_CHECKING:
    from oncefire.app import App
    from oncefire.triggers import Trigger

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 4000
TRUNCATED_PAYLOAD_CHARS = 1024


@dataclass(frozen=True, slots=True)
class Ending:
    """How a function call ended, before the retry rules are applied."""

    outcome: Outcome
    error: str | None = None
    requested_delay: float | None = None
    started_at: float | None = None  # by the app's clock; None: when it was claimed
    finished_at: float | None = None  # by the app's clock; None: when it is recorded


def describe(exc: BaseException) -> str:
    """The error text of an attempt: type, message and the end of the traceback, capped."""
    head = f"{type(exc).__name__}: {exc}"
    tail = "".join(traceback.format_exception(exc)[-6:])
    text = head if not tail else f"{head}\n{tail}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def build_event(trigger: Trigger, claimed: Claimed) -> Event:
    """The Event object a function receives for a claimed delivery."""
    stored = claimed.event
    return Event(
        id=stored.id,
        type=stored.type,
        source=stored.source,
        time=to_datetime(stored.time),
        data=view_of(stored, as_change=trigger.is_change),
        params=trigger.matches(stored.type, stored.source) or {},
        attempt=claimed.attempt,
        size=stored.size,
        function=trigger.name,
        raw=stored.data,
    )


def classify(trigger: Trigger, exc: BaseException) -> Ending:
    """Map an exception raised by a function to an attempt outcome."""
    if isinstance(exc, Retry | ClaimHeldError):  # transient even if permanent_errors match
        return Ending(Outcome.FAILED, describe(exc), exc.delay)
    if isinstance(exc, (PermanentError, *trigger.options.permanent_errors)):
        return Ending(Outcome.PERMANENT, describe(exc))
    return Ending(Outcome.FAILED, describe(exc))


def call(app: App, trigger: Trigger, event: Event) -> Ending:
    """Run the function once in this thread (an async one on a loop of its own)."""
    if trigger.is_async:
        return asyncio.run(call_async(app, trigger, event))
    token = CURRENT_EVENT.set(event)
    app_token = CURRENT_APP.set(app)
    try:
        trigger.fn(event)
    except BaseException as exc:
        return classify(trigger, exc)
    finally:
        CURRENT_EVENT.reset(token)
        CURRENT_APP.reset(app_token)
    return Ending(Outcome.SUCCEEDED)


async def call_async(app: App, trigger: Trigger, event: Event) -> Ending:
    """Await an async function once, cancelling it when it runs past its timeout."""
    # Each task runs in a copy of the context, so these settings stay with this attempt.
    CURRENT_EVENT.set(event)
    CURRENT_APP.set(app)
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
            # What is still running was handed back: cancel it, then close cleanly.
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


def expiry_error(trigger: Trigger, claimed: Claimed) -> str | None:
    """Why a delivery is too old to run (max_event_age), or None."""
    limit = trigger.options.max_event_age
    # A person's replay of a dead letter gives the event a fresh allowance.
    age = claimed.started_at - max(claimed.event.time, claimed.replayed_at or 0.0)
    if limit is not None and age > limit:
        return (
            f"event expired: {age:.1f} s old at attempt {claimed.attempt}, max_event_age {limit} s"
        )
    return None


def _log(trigger: Trigger, claimed: Claimed, what: str, *, level: int = logging.INFO) -> None:
    # Successes log at DEBUG: a line per event would cost a busy worker more than its work.
    log.log(
        level,
        "%s attempt %d of event %s: %s",
        trigger.name,
        claimed.attempt,
        claimed.event.id,
        what,
        extra={"delivery_id": claimed.lease.delivery_id, "function": trigger.name},
    )


def _first_line(text: str | None) -> str:
    return (text or "").splitlines()[0] if text else ""


def _finished_at(app: App, ending: Ending) -> float:
    return app.clock.now() if ending.finished_at is None else ending.finished_at


def record_many(app: App, items: Sequence[tuple[Trigger, Claimed, Ending]]) -> None:
    """Record many endings in one store transaction; successes in one statement."""
    successes = [item for item in items if item[2].outcome is Outcome.SUCCEEDED]
    with app.store.batch():
        if successes:
            done = app.store.complete_many(
                [
                    (
                        claimed.lease,
                        AttemptResult(
                            ending.outcome, _finished_at(app, ending), None, ending.started_at
                        ),
                    )
                    for _, claimed, ending in successes
                ]
            )
            for trigger, claimed, _ in successes:
                if claimed.lease.delivery_id in done:
                    _log(trigger, claimed, "succeeded", level=logging.DEBUG)
                else:
                    _log(trigger, claimed, LEASE_LOST, level=logging.WARNING)
        for trigger, claimed, ending in items:
            if ending.outcome is not Outcome.SUCCEEDED:
                record(app, trigger, claimed, ending)


LEASE_LOST = "lease lost, result discarded"


def record(app: App, trigger: Trigger, claimed: Claimed, ending: Ending) -> bool:
    """Apply the retry rules to an ending and record it; False if the lease was lost."""
    now = _finished_at(app, ending)
    decision = decide(
        ending.outcome,
        attempt=claimed.attempt,
        now=now,
        policy=trigger.options.retry_policy,
        is_retry_enabled=trigger.options.retry,
        error=ending.error,
        requested_delay=ending.requested_delay,
        is_oversized=claimed.event.size > app.settings.max_payload_bytes,
    )
    result = AttemptResult(ending.outcome, now, ending.error, ending.started_at)
    lease = claimed.lease
    if decision.state == "succeeded":
        is_recorded = app.store.complete(lease, result)
    elif decision.state == "pending":
        assert decision.run_at is not None
        is_recorded = app.store.retry(lease, result, decision.run_at)
    elif trigger.dead_letter_topic is not None and not decision.truncate:
        is_recorded = app.forward(trigger, claimed, lease, result)
    else:
        truncated = None
        if decision.truncate:
            text = codec.dumps(claimed.event.data)
            truncated = codec.dumps(
                {"truncated": text[:TRUNCATED_PAYLOAD_CHARS], "size": claimed.event.size}
            )
        is_recorded = app.store.bury(lease, result, decision.error, truncated)
    if not is_recorded:
        _log(trigger, claimed, LEASE_LOST, level=logging.WARNING)
    elif decision.state == "pending":
        wait = (decision.run_at or now) - now
        what = f"{ending.outcome}: {_first_line(ending.error)}; next attempt in {wait:.1f} s"
        _log(trigger, claimed, what)
    elif decision.state == "dead":
        what = f"{ending.outcome}: {_first_line(decision.error)}; dead letter"
        _log(trigger, claimed, what, level=logging.WARNING)
    else:
        _log(trigger, claimed, "succeeded", level=logging.DEBUG)
    return is_recorded


def run(app: App, trigger: Trigger, claimed: Claimed) -> Ending:
    """Run one claimed delivery to its end (expiry checked first); the caller records it."""
    expired = expiry_error(trigger, claimed)
    if expired is not None:
        return Ending(Outcome.EXPIRED, expired)
    started_at = app.clock.now()
    ending = call(app, trigger, build_event(trigger, claimed))
    return replace(ending, started_at=started_at, finished_at=app.clock.now())


async def run_async(app: App, trigger: Trigger, claimed: Claimed) -> Ending:
    """run() for an async function, on the worker's event loop."""
    expired = expiry_error(trigger, claimed)
    if expired is not None:
        return Ending(Outcome.EXPIRED, expired)
    started_at = app.clock.now()
    ending = await call_async(app, trigger, build_event(trigger, claimed))
    return replace(ending, started_at=started_at, finished_at=app.clock.now())
