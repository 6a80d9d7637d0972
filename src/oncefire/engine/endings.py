"""How an attempt's ending is written: the attempt row and the delivery's next state
(succeeded, pending at its retry, forwarded or dead), one transaction for many endings or one
each, and how an exhausted delivery ends (its dead-letter topic, else a dead letter)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from oncefire.engine.execution import storable
from oncefire.engine.ordering import ordering_note
from oncefire.errors import (
    StoreUnavailableError,
)
from oncefire.events import EventType
from oncefire.idempotency import warn_discarded, write_completions
from oncefire.model.messages import dead_letter_message
from oncefire.model.outbox import subscribers
from oncefire.retry import Outcome, decide
from oncefire.stores.base import Ending, Leased, Store

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime
    from oncefire.triggers import Trigger

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 4000

log = logging.getLogger(__name__)


def end_exhausted(
    store: Store,
    trigger: Trigger,
    leased: Leased,
    result: Ending,
    error: str | None,
    *,
    may_forward: bool,
    now: float,
) -> tuple[bool, str]:
    """End an exhausted delivery. Returns whether the lease still held, and what became of
    the delivery (for the log)."""
    topic = trigger.dead_letter_topic
    if topic is not None and may_forward:
        event = dead_letter_message(trigger, leased, now)
        with store.read() as tx:
            names = subscribers(tx.functions(), EventType.MESSAGE_PUBLISHED, topic, event.data)
        if names:
            return store.forward(leased.lease, result, event, names), (
                f"forwarded to topic {topic}"
            )
        error = f"not forwarded: nothing subscribes to dead-letter topic {topic}: {error}"
        ended_as = f"dead letter (nothing subscribes to topic {topic})"
    else:
        ended_as = "dead letter"
    error = ordering_note(store, trigger.options.ordered_by, leased, error)
    return store.bury(leased.lease, result, error, None), ended_as


def _log(trigger: Trigger, leased: Leased, what: str, *, level: int = logging.INFO) -> None:
    # Successes log at DEBUG: a line per event would cost a busy worker more than its work.
    log.log(
        level,
        "%s attempt %d of event %s: %s",
        trigger.name,
        leased.attempt,
        leased.event.id,
        what,
        extra={"delivery_id": leased.lease.delivery_id, "function": trigger.name},
    )


def _first_line(text: str | None) -> str:
    return (text or "").splitlines()[0] if text else ""


def _finished_at(rt: Runtime, ending: Ending) -> float:
    return rt.clock.now() if ending.finished_at is None else ending.finished_at


def _complete(rt: Runtime, ending: Ending) -> Ending:
    """A success as written: with its end time, and no error. Most already are, and are
    not copied (inside the write transaction: docs/performance.md)."""
    if ending.finished_at is not None and ending.error is None:
        return ending
    return replace(ending, error=None, finished_at=_finished_at(rt, ending))


def write_each(rt: Runtime, items: Sequence[tuple[Trigger, Leased, Ending]]) -> Counter[str]:
    """Write endings one transaction each, after a batch of them failed: one that still
    cannot be written becomes a dead letter with the reason, so its batch-mates never run
    again because of it. Raises StoreError if even that fails (the store is down). Returns
    the outcomes written (a dead letter made so counts as permanent)."""
    written: Counter[str] = Counter()
    for trigger, leased, ending in items:
        try:
            with rt.store.batch():
                if write_ending(rt, trigger, leased, ending):
                    written[ending.outcome] += 1
        except StoreUnavailableError:
            raise  # the store, not this write: written when it is back (the worker retries)
        except Exception as exc:
            reason = storable(
                f"oncefire could not write attempt {leased.attempt} "
                f"({ending.outcome}): {type(exc).__name__}: {exc}"
            )
            result = Ending(Outcome.PERMANENT, reason, finished_at=_finished_at(rt, ending))
            with rt.store.batch():
                write_completions(rt, ending.completions)  # the effects happened
                is_buried = rt.store.bury(leased.lease, result, reason, None)
            if is_buried:
                written[Outcome.PERMANENT] += 1
                _log(trigger, leased, f"{reason}; dead letter", level=logging.ERROR)
    return written


def write_endings(rt: Runtime, items: Sequence[tuple[Trigger, Leased, Ending]]) -> Counter[str]:
    """Write many endings in one store transaction; successes in one statement. Returns
    the outcomes written: an ending whose lease was lost is not."""
    written: Counter[str] = Counter()
    successes = [item for item in items if item[2].outcome == Outcome.SUCCEEDED]
    others = [item for item in items if item[2].outcome != Outcome.SUCCEEDED]
    with rt.store.batch():  # a success's records are completed with it (complete_many)
        write_completions(rt, [c for *_, e in others for c in e.completions])
        if successes:
            ended = rt.store.complete_many([(s[1].lease, _complete(rt, s[2])) for s in successes])
            warn_discarded([c for *_, e in successes for c in e.completions], ended.records)
            is_logged = log.isEnabledFor(logging.DEBUG)  # asked once, not once per event
            for trigger, leased, _ in successes:
                if leased.lease.delivery_id in ended.ids:
                    written[Outcome.SUCCEEDED] += 1
                    if is_logged:
                        _log(trigger, leased, "succeeded", level=logging.DEBUG)
                else:
                    _log(trigger, leased, LEASE_LOST, level=logging.WARNING)
        for trigger, leased, ending in others:
            if _write_ending(rt, trigger, leased, ending):
                written[ending.outcome] += 1
    return written


LEASE_LOST = "lease lost, result discarded"


def write_ending(rt: Runtime, trigger: Trigger, leased: Leased, ending: Ending) -> bool:
    """Apply the retry rules to an ending and write it, with the @idempotent records its
    attempt completed (written even if the lease was lost); False if the lease was lost."""
    if not ending.completions:
        return _write_ending(rt, trigger, leased, ending)
    with rt.store.batch():
        write_completions(rt, ending.completions)
        return _write_ending(rt, trigger, leased, ending)


def _write_ending(rt: Runtime, trigger: Trigger, leased: Leased, ending: Ending) -> bool:
    ending = replace(ending, error=storable(ending.error))
    now = _finished_at(rt, ending)
    decision = decide(
        Outcome(ending.outcome),
        attempt=leased.attempt,
        now=now,
        policy=trigger.options.retry_policy,
        is_retry_enabled=trigger.options.retry,
        error=ending.error,
        requested_delay=ending.requested_delay,
        is_oversized=leased.event.size > rt.settings.max_payload_bytes,
    )
    result = replace(ending, finished_at=now)
    lease = leased.lease
    ended_as = "dead letter"
    if decision.state == "succeeded":
        is_written = rt.store.complete(lease, result)
    elif decision.state == "pending":
        assert decision.run_at is not None
        is_written = rt.store.retry(lease, result, decision.run_at)
    else:  # a dead letter (full payload kept), or forwarded when something receives it
        is_written, ended_as = end_exhausted(
            rt.store,
            trigger,
            leased,
            result,
            storable(decision.error),
            may_forward=not decision.truncate,
            now=rt.clock.now(),
        )
    if not is_written:
        _log(trigger, leased, LEASE_LOST, level=logging.WARNING)
    elif decision.state == "pending":
        wait = (decision.run_at or now) - now
        what = f"{ending.outcome}: {_first_line(ending.error)}; next attempt in {wait:.1f} s"
        _log(trigger, leased, what, level=logging.WARNING)  # seen with no logging set up
    elif decision.state == "dead":
        what = f"{ending.outcome}: {_first_line(decision.error)}; {ended_as}"
        _log(trigger, leased, what, level=logging.WARNING)
    else:
        _log(trigger, leased, "succeeded", level=logging.DEBUG)
    return is_written
