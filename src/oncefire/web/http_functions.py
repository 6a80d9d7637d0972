"""HTTP functions: a Starlette app that runs each request as an event with exactly one attempt.

A request becomes an event (`http.request`, its id the request id, sent back as
`X-Request-Id`) and one delivery, leased by id at once and ended when the function returns:
never retried, the caller gets the answer. The function receives an `Event` whose `data` is a
`Request` (a Starlette request with its body already read) and returns a Response, a dict or
list (JSON), a str (text), bytes or None (204).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Scope

from oncefire.errors import FunctionError, PermanentError, RecordHeldError
from oncefire.events import Event
from oncefire.web.requests import Attempt, Slots, run_sync, start_attempt

if TYPE_CHECKING:
    from oncefire.app import App
    from oncefire.triggers import Trigger

log = logging.getLogger(__name__)
REQUEST_ID_HEADER = "X-Request-Id"
RETRY_AFTER_SECONDS = 1


class Request(StarletteRequest):
    """A Starlette Request whose body is already read: `await request.json()` works in async
    functions, `request.content` and `request.get_json()` in plain ones."""

    def __init__(self, scope: Scope, body: bytes) -> None:
        async def replay() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        super().__init__(scope, replay)
        self._body = body  # Starlette's own cache of the body: body(), json() and form() read it

    @property
    def content(self) -> bytes:
        """The request body."""
        return self._body

    def get_json(self) -> Any:
        """The body parsed as JSON; a body that is not JSON is the caller's error (400)."""
        try:
            return json.loads(self._body)
        except ValueError as exc:
            raise PermanentError(f"The request body is not valid JSON: {exc}.") from None


class ErrorResponse(FunctionError):
    """Raised by an HTTP function to answer with `response` while its attempt is recorded as
    failed; a protocol that shapes its own errors (Firebase's callable functions) uses it."""

    def __init__(self, response: Response, message: str) -> None:
        super().__init__(message)
        self.response = response


class PermanentErrorResponse(ErrorResponse, PermanentError):
    """An ErrorResponse for the caller's mistake: the attempt is recorded as permanent."""


def idempotency_key(event: Event) -> str:
    """The request's Idempotency-Key header, for `@idempotent(key=idempotency_key)`; a
    request without one is refused (400)."""
    request = event.data
    key = request.headers.get("idempotency-key", "") if isinstance(request, Request) else ""
    if not key:
        raise PermanentError("This function needs an Idempotency-Key header on each request.")
    return str(key)


def error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    """A JSON error response: {"error": code, "message": ..., plus extra fields}."""
    headers = {k: str(v) for k, v in extra.pop("headers", {}).items()}
    return JSONResponse({"error": code, "message": message, **extra}, status, headers)


def reply(result: Any) -> Response:
    """The response for what a function returned."""
    if isinstance(result, Response):
        return result
    if result is None:
        return Response(status_code=204)
    if isinstance(result, str):
        return PlainTextResponse(result)
    if isinstance(result, bytes):
        return Response(result, media_type="application/octet-stream")
    return JSONResponse(result)


async def read_body(request: StarletteRequest, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to be over limit bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class Endpoints:
    """The endpoints of an App's HTTP functions, with what they share: the thread pool of
    plain functions and each function's slots."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.pool = ThreadPoolExecutor(64, thread_name_prefix="oncefire-http")
        self.slots = {name: Slots(t.options.max_instances) for name, t in app.triggers.items()}
        self.in_threads = Slots(None)  # plain functions running in the pool, timed out or not

    def _ended(self, slots: Slots) -> None:
        slots.give_back()
        self.in_threads.give_back()

    def close(self, grace: float) -> int:
        """Stop the thread pool, waiting up to grace seconds for plain functions still
        running (past their timeout); return how many still run."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + grace
        while self.in_threads.taken and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.in_threads.taken

    def route(self, trigger: Trigger, below: bool = False) -> Route:
        """The Starlette route of one HTTP function (below: of the paths under its own)."""

        async def endpoint(request: StarletteRequest) -> Response:
            return await self.serve(trigger, request)

        path = trigger.source.rstrip("/") + "/{subpath:path}" if below else trigger.source
        return Route(path, endpoint, methods=list(trigger.event_types))

    async def serve(self, trigger: Trigger, request: StarletteRequest) -> Response:
        """Run one request through the function and answer it."""
        limit = self.app.body_limits.get(trigger.source, 10 * 1024 * 1024)
        body = await read_body(request, limit)
        if body is None:
            return error(413, "payload_too_large", f"The request body is over {limit} bytes.")
        if "\x00" in request.scope["path"]:  # the request's event has its path as source
            return error(
                400, "bad_request", "The request's path holds %00 (NUL), which no store keeps."
            )
        slots = self.slots[trigger.name]
        if not slots.try_take():
            return error(
                429,
                "too_many_requests",
                f"{trigger.name} already runs {slots.most} request(s) at once (max_instances).",
                headers={"Retry-After": RETRY_AFTER_SECONDS},
            )
        is_handed_over = False
        try:
            req = Request(request.scope, body)
            attempt = await asyncio.to_thread(start_attempt, self.app, trigger, req)
            if trigger.is_async:
                response = await self._run_async(attempt)
            else:
                self.in_threads.try_take()
                future = self.pool.submit(run_sync, attempt)
                future.add_done_callback(lambda _: self._ended(slots))
                is_handed_over = True  # the slot is held until the thread ends, even past 504
                response = await self._wait(attempt, asyncio.wrap_future(future))
        finally:
            if not is_handed_over:
                slots.give_back()
        response.headers[REQUEST_ID_HEADER] = attempt.event.id
        return response

    async def _run_async(self, attempt: Attempt) -> Response:
        async def call() -> Any:
            from oncefire.engine.runtime import CURRENT_RUNTIME
            from oncefire.events import CURRENT_APP, CURRENT_EVENT

            CURRENT_EVENT.set(attempt.event)  # this task's own copy of the context
            CURRENT_APP.set(self.app)
            CURRENT_RUNTIME.set(self.app.runtime)
            return await attempt.trigger.fn(attempt.event)

        return await self._wait(attempt, asyncio.ensure_future(call()))

    async def _wait(self, attempt: Attempt, running: asyncio.Future[Any]) -> Response:
        timeout = attempt.trigger.options.timeout
        event_id = attempt.event.id
        try:
            # A plain function's thread cannot be stopped: shielded, it runs on past the 504.
            shielded = running if attempt.trigger.is_async else asyncio.shield(running)
            result = await asyncio.wait_for(shielded, timeout)
        except TimeoutError:
            await asyncio.to_thread(attempt.timed_out)
            return error(504, "timeout", f"The function ran past {timeout:g} s.", event_id=event_id)
        except Exception as exc:
            ending = await asyncio.to_thread(attempt.failed, exc)
            if isinstance(exc, ErrorResponse):
                return exc.response
            if isinstance(exc, RecordHeldError):
                wait = max(1, round(exc.delay or RETRY_AFTER_SECONDS))
                return error(
                    409, "conflict", str(exc), event_id=event_id, headers={"Retry-After": wait}
                )
            if ending == "permanent":
                return error(400, "bad_request", str(exc), event_id=event_id)
            return error(
                500,
                "internal",
                f"The function raised {type(exc).__name__}.",
                type=type(exc).__name__,
                event_id=event_id,
            )
        try:
            response = reply(result)
        except (TypeError, ValueError) as exc:
            await asyncio.to_thread(attempt.failed, exc)
            return error(
                500,
                "internal",
                f"The function returned a {type(result).__name__}, which is not JSON.",
                event_id=event_id,
            )
        await asyncio.to_thread(attempt.succeeded)
        return response


async def _http_error(request: StarletteRequest, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error(404, "not_found", f"No HTTP function at {request.url.path}.")
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        return error(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.url.path}; use {allowed}.",
            headers={"Allow": allowed},
        )
    return error(exc.status_code, "http_error", exc.detail)


def build_asgi(app: App, mounts: Sequence[BaseRoute] = ()) -> Starlette:
    """The ASGI app serving app's HTTP functions, with other apps mounted beside them
    (e.g. `Mount("/_oncefire", dashboard)`)."""
    endpoints = Endpoints(app)
    routes: list[BaseRoute] = [*mounts, *(endpoints.route(t) for t in app.routes.values())]
    # After every exact path, the longest prefix first: /a/b's own function wins over /a's.
    for path in sorted(app.subpath_routes, key=len, reverse=True):
        routes.append(endpoints.route(app.routes[path], below=True))
    handlers: dict[Any, Callable[..., Any]] = {HTTPException: _http_error}
    asgi = Starlette(routes=routes, exception_handlers=handlers)
    asgi.state.endpoints = endpoints  # the server closes its thread pool when it stops
    return asgi
