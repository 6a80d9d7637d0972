"""@idempotent: side effects outside the store happen once per key, guarded by a leased record.

The whole state machine lives here; the store runs guarded one-statement operations on one
record per function and key (stored as "function/key"). A new key costs one statement to
acquire, or none of its own when the worker acquired it with the delivery's lease
(engine/leased_records.py); its completion is written with the attempt's ending, in the
transaction that writes it (a Deferred), and on its own only outside a worker or once that
ending is written. The other cases read the record too:

    absent / expired      -> acquire (in progress, leased)      -> run
    completed, same hash  -> return the stored result            (a dedupe hit, no run)
    any, other hash       -> PayloadMismatchError                (permanent)
    in progress, live     -> RecordHeldError                     (transient: retried later)
    in progress, expired  -> take over with a new token          -> run
    run succeeded         -> completed (only if our token still holds the record)
    run raised            -> record deleted (only if our token still holds it), error re-raised
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from oncefire.engine.runtime import CURRENT_RUNTIME
from oncefire.errors import (
    ConfigError,
    InvalidDocumentError,
    OncefireError,
    PayloadMismatchError,
    PermanentError,
    RecordHeldError,
    StoreError,
)
from oncefire.events import Event
from oncefire.model import codec
from oncefire.retry import is_real
from oncefire.stores.base import IdempotencyCompletion, IdempotencyRecord

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime
    from oncefire.triggers import Options

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
IN_PROGRESS, COMPLETED = "in_progress", "completed"
ACQUIRE_TRIES = 5  # a key that changes hands more often between two statements is retried later
# Seconds a completion committed on its own is retried across a store restart before giving
# up (one written with its attempt is retried by the worker, as the attempt is).
COMPLETE_FOR = 10.0
# A record whose lease ran out is taken over only this much later: its holder may be alive and
# still completing it across a store restart, and a take-over would repeat the effect it
# already had.
TAKE_OVER_AFTER = COMPLETE_FOR
COMPLETE_BACKOFF = 0.2
# A record a worker acquired with a delivery's lease (engine/leased_records.py) serves its
# attempt if it starts within this many seconds of the lease (it waits a second at most in
# its worker's queue): its lease may then end up to this much before the function's timeout,
# still well before TAKE_OVER_AFTER lets another attempt take it over.
QUEUED_FOR = 2.0


@dataclass(frozen=True, slots=True)
class IdempotencySpec:
    """The settings of one @idempotent function."""

    lease: float
    ttl: float
    key: Callable[[Event], Any]
    owner: str = ""  # the decorated function's qualified name
    helper: str = ""  # its plain name: part of the record's key


def check_registration(name: str, fn: Callable[..., Any], options: Options) -> None:
    """Refuse an @idempotent ttl that could expire before the last retry of an event, and a
    lease that a running attempt could outlive."""
    spec: IdempotencySpec | None = getattr(fn, "__oncefire_idempotent__", None)
    if spec is None:
        return
    minimum = options.redelivery_window()
    if spec.ttl < minimum:
        raise ConfigError(
            f"@idempotent(ttl={spec.ttl:g}) on {name!r} could forget a key before the event's "
            f"last retry: use ttl of at least {minimum:g} s (max_event_age plus the retry window)."
        )
    # A holder whose attempt may still run after its lease ends would be taken over while alive,
    # and the side effect would run twice.
    if spec.lease < options.timeout:
        raise ConfigError(
            f"@idempotent(lease={spec.lease:g}) on {name!r} is shorter than the function's "
            f"timeout: use lease of at least {options.timeout:g} s, so a running attempt keeps "
            "its record."
        )


def record_key(function: str, helper: str, key: str) -> str:
    """The stored key of an @idempotent record: per function, per helper, per key."""
    return f"{function}/{helper}/{key}"


def payload_hash(event: Event, owner: str = "") -> str:
    """A hash of the event's stored payload, whatever its key order (taken before the run),
    and of the @idempotent function that acquires it."""
    return hash_of(event.raw, owner)


def hash_of(raw: Any, owner: str) -> str:
    """payload_hash of a stored payload."""
    return hashlib.sha256(codec.canonical([owner, raw]).encode()).hexdigest()


def by_event_id(event: Event) -> str:
    """The default key of @idempotent: the event's id."""
    return event.id


def _runtime() -> Runtime:
    rt = CURRENT_RUNTIME.get()
    if rt is None:
        raise OncefireError("An @idempotent function must run under an oncefire trigger.")
    return rt


@dataclass(frozen=True, slots=True)
class _Hold:
    key: str
    token: str
    result: Any = None
    is_done: bool = False


def _acquire(rt: Runtime, spec: IdempotencySpec, event: Event) -> _Hold:
    named = spec.key(event)
    shown = "" if named is None else str(named)
    if not shown or "\x00" in shown:
        # Retrying cannot help, "None" as a key would join unrelated events, and no store
        # keeps NUL alike.
        raise PermanentError(
            f"The idempotency key of {event.function!r} for event {event.id} is {shown!r}: "
            "make key= return a non-empty string without NUL characters."
        )
    # Records are kept per function and helper (neither name has a '/'), so two functions on
    # one event each run once, and so do two helpers called by one function.
    key = record_key(event.function, spec.helper, shown)
    digest = payload_hash(event, spec.owner)
    token = uuid.uuid4().hex
    now = rt.clock.now()
    held = IdempotencyRecord(
        key,
        event.function,
        IN_PROGRESS,
        token,
        digest,
        now + spec.lease,
        now + max(spec.ttl, spec.lease),
        None,
    )
    store = rt.store
    for _ in range(ACQUIRE_TRIES):
        # The common case, a new (or expired) key, is this one statement.
        if store.acquire_idempotency(held, now):
            return _Hold(key, token)
        record = store.idempotency_record(key)
        if record is None or record.expires_at <= now:
            continue  # released or expired since it was refused: acquire again
        if record.payload_hash != digest:
            raise PayloadMismatchError(
                f"Idempotency key {shown!r} was first used with a different payload, or by "
                "another @idempotent function: use a key that names this payload and "
                "function, or the event id."
            )
        if record.status == COMPLETED:
            store.count_dedupe_hit(event.function, now)
            result = None if record.result_json is None else codec.loads(record.result_json)
            return _Hold(key, record.token, result, is_done=True)
        if record.lease_until > now:
            # Not a dedupe hit yet: the retry that finds the key completed counts as one.
            raise RecordHeldError(
                f"Idempotency key {shown!r} is held by a running attempt until its lease "
                f"ends in {record.lease_until - now:.0f} s; this attempt is retried later.",
                delay=record.lease_until - now,
            )
        held_until = record.lease_until + TAKE_OVER_AFTER
        if held_until > now:
            raise RecordHeldError(
                f"Idempotency key {shown!r} is held by an attempt whose lease ended "
                f"{now - record.lease_until:.0f} s ago: its holder may still be completing it "
                f"across a store restart, so it is taken over in {held_until - now:.0f} s.",
                delay=held_until - now,
            )
        # Guarded by the token read: of two attempts taking over one key, one wins, and a
        # holder that completes or releases meanwhile keeps its record.
        if store.take_over_idempotency(held, record.token, now - TAKE_OVER_AFTER):
            log.warning("taking over idempotency key %r after its lease ran out", shown)
            return _Hold(key, token)
    raise RecordHeldError(
        f"Idempotency key {shown!r} changed hands {ACQUIRE_TRIES} times while this attempt "
        "tried to acquire it; this attempt is retried later."
    )


class Deferred:
    """The records one attempt completed, which its worker writes with the attempt's ending,
    in the same transaction (no statement of their own). Once the worker has taken them (the
    attempt ended, or is written as timed out), a later completion is written at once. And
    the record its worker acquired for it with its lease (engine/leased_records.py), if any,
    until the attempt takes it."""

    # One lock for all: one made per attempt cost more than the rare offers wait on it.
    _lock = threading.Lock()

    def __init__(self, acquired: IdempotencyRecord | None = None) -> None:
        self._completions: list[IdempotencyCompletion] = []
        self._is_taken = False
        self._acquired = acquired

    def take_acquired(self) -> IdempotencyRecord | None:
        """The record acquired with the lease, once (None: none, or taken)."""
        with self._lock:
            acquired, self._acquired = self._acquired, None
            return acquired

    def offer(self, completion: IdempotencyCompletion) -> bool:
        """Keep a completion for the attempt's ending; False once they were taken."""
        with self._lock:
            if not self._is_taken:
                self._completions.append(completion)
            return not self._is_taken

    def take(self) -> tuple[IdempotencyCompletion, ...]:
        """The completions kept, to be written with the attempt's ending."""
        with self._lock:
            self._is_taken = True
            return tuple(self._completions)


DEFERRED: ContextVar[Deferred | None] = ContextVar("oncefire_deferred", default=None)
"""The Deferred of the attempt running in this context; None: completions are written at once."""


def _completion(
    rt: Runtime, spec: IdempotencySpec, held: _Hold, result: Any
) -> IdempotencyCompletion:
    try:
        result_json: str | None = codec.dumps(result)
    except InvalidDocumentError:
        log.warning("the result of idempotency key %r is not JSON; null is stored", held.key)
        result_json = None
    now = rt.clock.now()
    return IdempotencyCompletion(held.key, held.token, now, now + spec.ttl, result_json)


def _defer(completion: IdempotencyCompletion) -> bool:
    """Leave a completion to the worker that runs this attempt; False if it is written now."""
    deferred = DEFERRED.get()
    return deferred is not None and deferred.offer(completion)


def _finish(rt: Runtime, spec: IdempotencySpec, held: _Hold, result: Any) -> None:
    """Complete a record with its result: with the attempt's ending, or now."""
    completion = _completion(rt, spec, held, result)
    if not _defer(completion):
        complete_now(rt, completion)


def complete_now(rt: Runtime, completion: IdempotencyCompletion) -> None:
    """Complete a record in a statement of its own."""
    # The effect has happened: a lost completion would run it again on retry, so a store that
    # restarts (or drops the connection) meanwhile is tried again for a while.
    give_up_at = time.monotonic() + COMPLETE_FOR
    while True:
        try:
            return write_completions(rt, [completion])
        except StoreError as exc:
            if time.monotonic() >= give_up_at:
                raise
            log.warning(
                "completing idempotency key %r failed (%s); trying again", completion.key, exc
            )
            time.sleep(COMPLETE_BACKOFF)


def write_completions(rt: Runtime, completions: Sequence[IdempotencyCompletion]) -> None:
    """Complete records (in the caller's batch, if one is open); a record another attempt
    took over meanwhile keeps its new holder, and this result is discarded."""
    if completions:
        warn_discarded(completions, rt.store.complete_idempotency_many(completions))


def warn_discarded(completions: Sequence[IdempotencyCompletion], completed: set[str]) -> None:
    """Say which completions were not written: another attempt took their record over."""
    for completion in completions:
        if completion.key not in completed:
            log.warning(
                "idempotency key %r was taken over; this result is discarded", completion.key
            )


def _release(rt: Runtime, held: _Hold) -> None:
    rt.store.release_idempotency(held.key, held.token)


def _acquired(rt: Runtime, spec: IdempotencySpec, event: Event) -> _Hold | None:
    """The record this attempt's worker acquired for it with its lease, if the attempt starts
    within QUEUED_FOR of it; one acquired longer ago is released (and acquired anew)."""
    deferred = DEFERRED.get()
    acquired = None if deferred is None else deferred.take_acquired()
    if acquired is None:
        return None
    timeout = rt.triggers[event.function].options.timeout
    if acquired.key == record_key(event.function, spec.helper, str(spec.key(event))) and (
        acquired.lease_until + QUEUED_FOR >= rt.clock.now() + timeout
    ):
        return _Hold(acquired.key, acquired.token)
    rt.store.release_idempotency(acquired.key, acquired.token)
    return None


def _hold(rt: Runtime, spec: IdempotencySpec, event: Event) -> _Hold:
    """The record this attempt holds: acquired with its lease, or now."""
    return _acquired(rt, spec, event) or _acquire(rt, spec, event)


def idempotent(
    lease: float = 60.0,
    ttl: float = 7 * 86400.0,
    key: Callable[[Event], Any] = by_event_id,
) -> Callable[[F], F]:
    """Run the function once per key; a repeat returns the stored result without running."""
    # Finite, so every in-progress record expires even if no attempt ever comes back to it.
    if not all(is_real(v) and v > 0 for v in (lease, ttl)):
        raise ConfigError("@idempotent lease and ttl must be positive, finite numbers of seconds.")
    if not callable(key):
        raise ConfigError(f"@idempotent(key={key!r}) must be a function of the event.")

    def decorator(fn: F) -> F:
        registered = getattr(fn, "__oncefire_trigger__", None)
        if registered is not None:
            raise ConfigError(
                f"@idempotent is above the trigger decorator of {registered!r}, so the trigger "
                "would run the function unguarded: put @idempotent below it, next to the def."
            )
        # The qualified name alone: the module name depends on how the app was imported.
        spec = IdempotencySpec(lease, ttl, key, fn.__qualname__, fn.__name__)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(event: Event) -> Any:
                rt = _runtime()
                # Store calls run in a thread: a busy store must not stall the event loop.
                held = await asyncio.to_thread(_hold, rt, spec, event)
                if held.is_done:
                    return held.result
                try:
                    result = await fn(event)
                except BaseException:
                    _release(rt, held)  # at once, even while the task is being cancelled
                    raise
                completion = _completion(rt, spec, held, result)
                if not _defer(completion):
                    await asyncio.to_thread(complete_now, rt, completion)
                return result

            run_async.__oncefire_idempotent__ = spec  # type: ignore[attr-defined]
            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(event: Event) -> Any:
            rt = _runtime()
            held = _hold(rt, spec, event)
            if held.is_done:
                return held.result
            try:
                result = fn(event)
            except BaseException:
                _release(rt, held)
                raise
            _finish(rt, spec, held, result)
            return result

        run.__oncefire_idempotent__ = spec  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorator
