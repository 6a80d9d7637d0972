"""The JSON API under /api/: everything the pages show and do (see openapi.py). Store calls
block, so each runs in the dashboard's threads (threads.py): an endpoint that reads is a
plain function under `@off_loop`; an action reads its body, then calls `in_thread`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from oncefire.app import App
from oncefire.errors import ConfigError, DeadLetterNotFoundError
from oncefire.model import codec
from oncefire.operations.redaction import redact
from oncefire.web.dashboard import views
from oncefire.web.dashboard.openapi import document
from oncefire.web.dashboard.security import require_csrf
from oncefire.web.dashboard.threads import in_thread, off_loop


def app_of(request: Request) -> App:
    """The oncefire App the dashboard serves."""
    app: App = request.app.state.oncefire
    return app


def int_param(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    """An integer query parameter within [low, high], or a 400 error."""
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"The query parameter {name} must be a whole number.") from None
    if not low <= value <= high:
        raise ConfigError(f"The query parameter {name} must be between {low} and {high}.")
    return value


def dead_id(request: Request) -> int:
    """The dead letter id of the path (ids past 2**62 exist nowhere)."""
    value = int(request.path_params["id"])
    if value > 2**62:
        raise DeadLetterNotFoundError(f"No dead letter {value}: it never existed.")
    return value


def text_param(request: Request, name: str) -> str | None:
    """A text query parameter; None when absent or empty."""
    return request.query_params.get(name) or None


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object body ({} for none), or a 400 error."""
    raw = await request.body()
    if not raw:
        return {}
    body = codec.parse(raw, "The request body")
    if not isinstance(body, dict):
        raise ConfigError("The request body must be a JSON object.")
    return body


def ok(value: Any, status: int = 200) -> JSONResponse:
    """A JSON answer."""
    return JSONResponse(value, status_code=status)


@off_loop
def list_functions(request: Request) -> JSONResponse:
    """GET /api/functions: every function with its 24-hour figures."""
    return ok(views.functions(app_of(request)))


@off_loop
def get_function(request: Request) -> JSONResponse:
    """GET /api/functions/{name}: one function with its attempts per hour."""
    return ok(views.function(app_of(request), request.path_params["name"]))


@off_loop
def list_dead_letters(request: Request) -> JSONResponse:
    """GET /api/functions/{name}/dead-letters: count, newest items, groups; by error text
    (a bounded search), by error group or all, paged by before."""
    limit = int_param(request, "limit", 50, 1, 1000) or 50
    found = views.dead_letters(
        app_of(request),
        request.path_params["name"],
        error_contains=text_param(request, "error"),
        error_group=text_param(request, "group"),
        before=int_param(request, "before", None, 1, 2**62),
        limit=limit,
    )
    return ok(found)


@off_loop
def count_dead_letters(request: Request) -> JSONResponse:
    """GET /api/functions/{name}/dead-letters/count: what the badge polls; by error text, a
    bounded search (count_is_lower_bound true when older dead letters were not read); by
    error group, a count up to GROUP_COUNT_CAP (count_is_lower_bound true past it)."""
    app, name = app_of(request), request.path_params["name"]
    views.trigger_of(app, name)
    error, group = text_param(request, "error"), text_param(request, "group")
    if error is not None:
        found = app.dead_letters.search(name, error, limit=1)
        return ok({"count": found.count, "count_is_lower_bound": found.is_lower_bound})
    if group is not None:
        counted = app.dead_letters.count_group(name, group)
        return ok({"count": counted.count, "count_is_lower_bound": counted.is_lower_bound})
    return ok({"count": app.dead_letters.count(name), "count_is_lower_bound": False})


@off_loop
def list_executions(request: Request) -> JSONResponse:
    """GET /api/functions/{name}/executions: recent attempts."""
    app, name = app_of(request), request.path_params["name"]
    views.trigger_of(app, name)
    limit = int_param(request, "limit", 50, 1, 500) or 50
    found = app.history.executions(name, outcome=text_param(request, "outcome"), limit=limit)
    return ok([redact(a.to_dict()) for a in found])


@off_loop
def get_dead_letter(request: Request) -> JSONResponse:
    """GET /api/dead-letters/{id}: one dead letter and its attempts."""
    return ok(views.dead_letter(app_of(request), dead_id(request)))


@off_loop
def get_event(request: Request) -> JSONResponse:
    """GET /api/events/{id}: one event and every delivery's attempts."""
    return ok(redact(app_of(request).history.event(request.path_params["id"]).to_dict()))


@off_loop
def list_audit(request: Request) -> JSONResponse:
    """GET /api/audit: the audit trail, newest first."""
    limit = int_param(request, "limit", 50, 1, 500) or 50
    before = int_param(request, "before", None, 1, 2**62)
    entries = app_of(request).operators.audit_log(limit, before)
    return ok([e.to_dict() for e in entries])


async def replay(request: Request) -> JSONResponse:
    """POST /api/dead-letters/{id}/replay."""
    await require_csrf(request)
    operators = app_of(request).operators
    await in_thread(operators.replay, dead_id(request), actor=request.state.actor)
    return ok({"replayed": 1})


async def dismiss(request: Request) -> JSONResponse:
    """POST /api/dead-letters/{id}/dismiss."""
    await require_csrf(request)
    operators = app_of(request).operators
    await in_thread(operators.dismiss, dead_id(request), actor=request.state.actor)
    return ok({"dismissed": 1})


async def replay_edited(request: Request) -> JSONResponse:
    """POST /api/dead-letters/{id}/replay-edited with {"payload": {...}}."""
    await require_csrf(request)
    body = await json_body(request)
    if "payload" not in body:
        raise ConfigError('Give the edited payload as {"payload": {...}}.')
    event_id = await in_thread(
        app_of(request).operators.replay_edited,
        dead_id(request),
        body["payload"],
        actor=request.state.actor,
    )
    return ok({"replayed": 1, "event_id": event_id})


def bulk(verb: str) -> Any:
    """POST /api/functions/{name}/dead-letters/{verb}-all: act on a group or a filter."""

    async def endpoint(request: Request) -> JSONResponse:
        await require_csrf(request)
        app, name = app_of(request), request.path_params["name"]
        await in_thread(views.trigger_of, app, name)
        body = await json_body(request)
        where = {key: body.get(key) for key in ("error_contains", "error_group")}
        for key, value in where.items():
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{key} must be a string.")
        if where["error_contains"] and where["error_group"] is not None:
            raise ConfigError("Give error_contains or error_group, not both.")
        done = await in_thread(
            getattr(app.operators, f"{verb}_all"),
            name,
            error_contains=where["error_contains"] or None,
            error_group=where["error_group"],
            actor=request.state.actor,
            batch=views.BULK_BATCH,
        )
        return ok({f"{verb}ed": done})

    return endpoint


def pause_or_resume(verb: str) -> Any:
    """POST /api/functions/{name}/pause or /resume: {"paused": true} when it changed."""

    async def endpoint(request: Request) -> JSONResponse:
        await require_csrf(request)
        act = getattr(app_of(request).operators, verb)
        changed = await in_thread(act, request.path_params["name"], actor=request.state.actor)
        return ok({f"{verb}d": changed})

    return endpoint


@off_loop
def unrouted(request: Request) -> JSONResponse:
    """GET /api/unrouted: the unrouted events warned about (count: of a source a function
    used to take or keep_unrouted names; origins: where from), and all those kept."""
    found = app_of(request).unrouted_report()
    origins = [{"origin": origin, "events": n} for origin, n in found.origins]
    return ok({"count": found.awaited, "kept": found.kept, "origins": origins})


async def openapi(request: Request) -> JSONResponse:
    """GET /api/openapi.json: the OpenAPI document."""
    return ok(document())


FUNCTION = "/api/functions/{name:str}"
routes = [
    Route("/api/openapi.json", openapi),
    Route("/api/functions", list_functions),
    Route(FUNCTION, get_function),
    Route(f"{FUNCTION}/dead-letters", list_dead_letters),
    Route(f"{FUNCTION}/dead-letters/count", count_dead_letters),
    Route(f"{FUNCTION}/dead-letters/replay-all", bulk("replay"), methods=["POST"]),
    Route(f"{FUNCTION}/dead-letters/dismiss-all", bulk("dismiss"), methods=["POST"]),
    Route(f"{FUNCTION}/executions", list_executions),
    Route(f"{FUNCTION}/pause", pause_or_resume("pause"), methods=["POST"]),
    Route(f"{FUNCTION}/resume", pause_or_resume("resume"), methods=["POST"]),
    Route("/api/unrouted", unrouted),
    Route("/api/dead-letters/{id:int}", get_dead_letter),
    Route("/api/dead-letters/{id:int}/replay", replay, methods=["POST"]),
    Route("/api/dead-letters/{id:int}/dismiss", dismiss, methods=["POST"]),
    Route("/api/dead-letters/{id:int}/replay-edited", replay_edited, methods=["POST"]),
    Route("/api/events/{id:str}", get_event),
    Route("/api/audit", list_audit),
]
