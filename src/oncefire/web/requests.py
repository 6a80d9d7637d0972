"""One HTTP request's attempt: its event and delivery in the store, the call, its ending written.

The request is appended as an event with one delivery, which is leased by id at once (no
worker leases HTTP functions) and completed when the caller has its answer, whatever the
outcome: the attempt row holds the outcome, and a failed request is never a dead letter
(there is nothing to replay: the caller already has the error).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncefire.clock import to_datetime
from oncefire.engine.attempts import worker_name
from oncefire.engine.execution import classify
from oncefire.engine.runtime import CURRENT_RUNTIME
from oncefire.errors import StoreError
from oncefire.events import CURRENT_APP, CURRENT_EVENT, Event, EventType, StoredEvent
from oncefire.model import codec
from oncefire.retry import Outcome
from oncefire.stores.base import Ending, Leased

if TYPE_CHECKING:
    from starlette.requests import Request

    from oncefire.app import App
    from oncefire.triggers import Trigger

log = logging.getLogger(__name__)
LEASE_MARGIN = 30.0  # past timeout + this, a request's lease is a dead server's
STORED_BODY_BYTES = 64 * 1024  # a longer body is kept as its size and hash only
CRASHED_ERROR = "the HTTP server stopped while the request ran"
WORKER = worker_name()


class Slots:
    """How many requests of one function may run at once in this process (max_instances)."""

    def __init__(self, most: int | None) -> None:
        self.most = most
        self._taken = 0
        self._lock = threading.Lock()

    def try_take(self) -> bool:
        """Take a slot if one is free."""
        with self._lock:
            if self.most is not None and self._taken >= self.most:
                return False
            self._taken += 1
            return True

    def give_back(self) -> None:
        """Free a slot taken by try_take."""
        with self._lock:
            self._taken -= 1

    @property
    def taken(self) -> int:
        """How many slots are taken now."""
        return self._taken


def request_payload(request: Request, body: bytes) -> dict[str, Any]:
    """The stored payload of a request: what identical requests share (never the request id,
    the time or headers other than Content-Type), so `@idempotent` hashes them alike."""
    try:
        text: str | None = body.decode() if len(body) <= STORED_BODY_BYTES else None
    except UnicodeDecodeError:
        text = None
    if text is not None and "\x00" in text:  # not text every store keeps: kept as bytes are
        text = None
    return {
        "method": request.method,
        "path": request.url.path,
        "query": request.url.query,
        "content_type": request.headers.get("content-type"),
        "body": text,
        "body_size": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }


@dataclass(frozen=True, slots=True)
class Attempt:
    """A request's leased delivery and the Event its function receives."""

    app: App
    trigger: Trigger
    leased: Leased
    event: Event

    def _end(self, outcome: str, error: str | None) -> None:
        now = self.app.clock.now()
        result = Ending(outcome, finished_at=now, error=error, started_at=self.leased.started_at)
        if not self.app.store.complete(self.leased.lease, result):
            log.warning("the attempt of request %s was already written", self.event.id)

    def succeeded(self) -> None:
        """Write the attempt as succeeded."""
        self._end(Outcome.SUCCEEDED, None)

    def timed_out(self) -> None:
        """Write the attempt as timed out (the caller had a 504)."""
        timeout = self.trigger.options.timeout
        log.warning(
            "%s request %s: timed out after %g s", self.trigger.name, self.event.id, timeout
        )
        self._end(Outcome.TIMEOUT, f"timed out after {timeout:g} s")

    def failed(self, exc: BaseException) -> str:
        """Write the attempt of a function that raised; return its outcome."""
        ending = classify(self.trigger, exc)
        level = logging.INFO if ending.outcome is Outcome.PERMANENT else logging.ERROR
        log.log(
            level,
            "%s request %s: %s",
            self.trigger.name,
            self.event.id,
            ending.outcome,
            exc_info=exc if level == logging.ERROR else None,
            extra={"delivery_id": self.leased.lease.delivery_id, "function": self.trigger.name},
        )
        self._end(ending.outcome, ending.error)
        return str(ending.outcome)


def start_attempt(app: App, trigger: Trigger, request: Request) -> Attempt:
    """Append the request's event and delivery, and lease the delivery to this server."""
    body: bytes = request._body  # read by the endpoint before the attempt starts
    now = app.clock.now()
    payload = request_payload(request, body)
    data_json = codec.dumps(payload)
    stored = StoredEvent(
        codec.new_id(now), EventType.HTTP_REQUEST, payload["path"], now, payload, len(data_json)
    )
    store = app.store
    with store.transaction() as tx:
        tx.append(stored, [], now, is_new=True, data_json=data_json)
        tx.mark_routed(stored.id, "unrouted", None)  # its delivery is made here: not unrouted
        ids = tx.add_deliveries(stored.id, [trigger.name], now)
    lease_until = now + trigger.options.timeout + LEASE_MARGIN
    leased = store.lease_due(
        worker=WORKER,
        now=now,
        lease_until=lease_until,
        limit=1,
        functions=[trigger.name],
        caps={},
        delivery_ids=ids,
    )
    if not leased:
        raise StoreError(f"The delivery of request {stored.id} could not be leased.")
    event = Event(
        id=stored.id,
        type=stored.type,
        source=stored.source,
        time=to_datetime(now),
        data=request,
        params={k: str(v) for k, v in request.path_params.items()},
        attempt=1,
        size=stored.size,
        function=trigger.name,
        raw=payload,
    )
    return Attempt(app, trigger, leased[0], event)


def run_sync(attempt: Attempt) -> Any:
    """Call a plain function in this thread, as the attempt's event; return what it returned."""
    event_token = CURRENT_EVENT.set(attempt.event)
    app_token = CURRENT_APP.set(attempt.app)
    rt_token = CURRENT_RUNTIME.set(attempt.app.runtime)
    try:
        return attempt.trigger.fn(attempt.event)
    finally:
        CURRENT_EVENT.reset(event_token)
        CURRENT_APP.reset(app_token)
        CURRENT_RUNTIME.reset(rt_token)


def sweep_crashed(app: App) -> int:
    """Write as crashed the requests a stopped HTTP server left running; how many."""
    names = [name for name, t in app.triggers.items() if not t.kind.is_run_by_workers]
    if not names:
        return 0
    now = app.clock.now()
    ended = 0
    for leased in app.store.take_expired_leases(now, now + app.settings.lease, names, 1000):
        result = Ending(Outcome.CRASHED, finished_at=now, error=CRASHED_ERROR, started_at=None)
        ended += app.store.complete(leased.lease, result)
    return ended
