"""@idempotent: side effects outside the store happen once per key, guarded by a leased claim.

The whole state machine lives here; the store only locks, reads and writes one record:

    absent / expired      -> claim (in progress, leased)        -> run
    completed, same hash  -> return the stored result            (a dedupe hit, no run)
    any, other hash       -> PayloadMismatchError                (permanent)
    in progress, live     -> ClaimHeldError                      (transient: retried later)
    in progress, expired  -> take over with a new token          -> run
    run succeeded         -> completed (only if our token still holds the claim)
    run raised            -> record deleted (only if our token still holds it), error re-raised
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from oncefire import codec
from oncefire.errors import (
    ClaimHeldError,
    ConfigError,
    InvalidDocumentError,
    OncefireError,
    PayloadMismatchError,
)
from oncefire.events import CURRENT_APP, Event
from oncefire.stores.base import IdempotencyRecord

if TYPE_CHECKING:
    from oncefire.app import App
    from oncefire.triggers import Options

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
IN_PROGRESS, COMPLETED = "in_progress", "completed"


@dataclass(frozen=True, slots=True)
class IdempotencySpec:
    """The settings of one @idempotent function."""

    lease: float
    ttl: float
    key: Callable[[Event], Any]


def check_registration(name: str, fn: Callable[..., Any], options: Options) -> None:
    """Refuse an @idempotent ttl that could expire before the last retry of an event."""
    spec: IdempotencySpec | None = getattr(fn, "__oncefire_idempotent__", None)
    if spec is None:
        return
    minimum = (options.max_event_age or 0.0) + options.retry_policy.window()
    if options.retry and spec.ttl < minimum:
        raise ConfigError(
            f"@idempotent(ttl={spec.ttl:g}) on {name!r} could forget a key before the event's "
            f"last retry: use ttl of at least {minimum:g} s (max_event_age plus the retry window)."
        )


def payload_hash(event: Event) -> str:
    """A hash of the event's stored payload (fixed before the function can touch it)."""
    return hashlib.sha256(codec.dumps(event.raw).encode()).hexdigest()


def _app() -> App:
    app = CURRENT_APP.get()
    if app is None:
        raise OncefireError("An @idempotent function must run under an oncefire trigger.")
    return app  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class _Claim:
    key: str
    token: str
    result: Any = None
    is_done: bool = False


def _acquire(app: App, spec: IdempotencySpec, event: Event) -> _Claim:
    key = str(spec.key(event))
    if not key:
        raise InvalidDocumentError("An idempotency key must be a non-empty string.")
    digest = payload_hash(event)
    token = uuid.uuid4().hex
    now = app.clock.now()
    with app.store.transaction() as tx:
        record = tx.get_idempotency(key)
        if record is not None and record.expires_at > now:
            if record.payload_hash != digest:
                raise PayloadMismatchError(
                    f"Idempotency key {key!r} was first used with a different payload: use a "
                    "key that names this payload, or the event id."
                )
            if record.status == COMPLETED:
                tx.record_dedupe(event.function, now)
                result = None if record.result_json is None else codec.loads(record.result_json)
                return _Claim(key, record.token, result, is_done=True)
            if record.lease_until > now:
                tx.record_dedupe(event.function, now)
                raise ClaimHeldError(
                    f"Idempotency key {key!r} is held by a running attempt until its lease "
                    f"ends in {record.lease_until - now:.0f} s; this attempt is retried later.",
                    delay=record.lease_until - now,
                )
            log.warning("taking over idempotency key %r after its lease ran out", key)
        tx.put_idempotency(
            IdempotencyRecord(
                key,
                event.function,
                IN_PROGRESS,
                token,
                digest,
                now + spec.lease,
                now + max(spec.ttl, spec.lease),
                None,
            )
        )
    return _Claim(key, token)


def _finish(app: App, spec: IdempotencySpec, claim: _Claim, result: Any) -> None:
    try:
        result_json: str | None = codec.dumps(result)
    except InvalidDocumentError:
        log.warning("the result of idempotency key %r is not JSON; null is stored", claim.key)
        result_json = None
    now = app.clock.now()
    with app.store.transaction() as tx:
        record = tx.get_idempotency(claim.key)
        if record is None or record.token != claim.token:
            log.warning("idempotency key %r was taken over; this result is discarded", claim.key)
            return
        tx.put_idempotency(
            IdempotencyRecord(
                claim.key,
                record.function,
                COMPLETED,
                claim.token,
                record.payload_hash,
                now,
                now + spec.ttl,
                result_json,
            )
        )


def _release(app: App, claim: _Claim) -> None:
    with app.store.transaction() as tx:
        record = tx.get_idempotency(claim.key)
        if record is not None and record.token == claim.token and record.status == IN_PROGRESS:
            tx.delete_idempotency(claim.key)


def idempotent(
    lease: float = 60.0,
    ttl: float = 7 * 86400.0,
    key: Callable[[Event], Any] = lambda event: event.id,
) -> Callable[[F], F]:
    """Run the function once per key; a repeat returns the stored result without running."""
    if lease <= 0 or ttl <= 0:
        raise ConfigError("@idempotent lease and ttl must be positive numbers of seconds.")
    spec = IdempotencySpec(lease, ttl, key)

    def decorator(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(event: Event) -> Any:
                app = _app()
                claim = _acquire(app, spec, event)
                if claim.is_done:
                    return claim.result
                try:
                    result = await fn(event)
                except BaseException:
                    _release(app, claim)
                    raise
                _finish(app, spec, claim, result)
                return result

            run_async.__oncefire_idempotent__ = spec  # type: ignore[attr-defined]
            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(event: Event) -> Any:
            app = _app()
            claim = _acquire(app, spec, event)
            if claim.is_done:
                return claim.result
            try:
                result = fn(event)
            except BaseException:
                _release(app, claim)
                raise
            _finish(app, spec, claim, result)
            return result

        run.__oncefire_idempotent__ = spec  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorator
