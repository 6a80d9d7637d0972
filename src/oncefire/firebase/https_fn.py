"""HTTP and callable functions with Firebase's names, served by `oncefire run` at `/<name>`.

`@https_fn.on_request()`: the function receives a `flask.Request` (`https_fn.Request`) and
runs inside a Flask request and application context, so `flask.jsonify`, `flask.request` and
a whole Flask app dispatched from inside it work; it returns whatever Flask's `make_response`
takes. `/<name>` and every path below it reach it; `request.path` is the part below it.
`@https_fn.on_call()`: the callable protocol (see `callables`). `cors=` answers preflights
without running the function. Needs Flask: `pip install 'oncefire[firebase]'`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.http import cors as cors_policy
from oncefire.firebase.http import flask_bridge
from oncefire.firebase.http.callables import (
    AppCheckData,
    AuthData,
    CallableRequest,
    FunctionsErrorCode,
    HttpsError,
    handle,
    load_configured_verifier,
)
from oncefire.firebase.registration.apps import default_app

if TYPE_CHECKING:
    from flask import Request, Response
    from starlette.responses import Response as StarletteResponse
    from werkzeug.wrappers import Response as WerkzeugResponse

__all__ = [
    "AppCheckData",
    "AuthData",
    "CallableRequest",
    "FunctionsErrorCode",
    "HttpsError",
    "Request",
    "Response",
    "on_call",
    "on_request",
]

F = TypeVar("F", bound=Callable[..., Any])
ALLOWED = frozenset({"timeout_sec", "max_instances"})
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def __getattr__(name: str) -> Any:
    """`Request` and `Response` are Flask's, imported when first named."""
    if name in ("Request", "Response"):
        return getattr(flask_bridge.require_flask(f"https_fn.{name}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def on_request(**options: Any) -> Callable[[F], F]:
    """Serve the function at /<its name> and every path below it, for every method."""
    flask = flask_bridge.require_flask("https_fn.on_request")
    policy = cors_policy.policy(options.pop("cors", None))
    opts = firebase_options.translate("https_fn.on_request", options, allowed=ALLOWED)
    app = default_app()

    def decorator(fn: F) -> F:
        root = f"/{fn.__name__}"

        def respond(request: Request) -> WerkzeugResponse:
            if policy is not None and request.method == "OPTIONS":
                return policy.preflight(request)
            try:
                response: WerkzeugResponse = flask.make_response(flask_bridge.call(fn, request))
            except flask_bridge.http_exception() as exc:  # flask.abort(...), a bad JSON body
                response = exc.get_response(request.environ)
            if policy is not None:
                policy.decorate(request, response)
            return response

        def run(event: OncefireEvent) -> StarletteResponse:
            return flask_bridge.serve(event, root, respond)

        _register(app, run, fn, root, subpaths=True, opts=opts)
        return fn

    return decorator


def on_call(**options: Any) -> Callable[[F], F]:
    """Serve the function at /<its name> as a callable function (the client SDKs' protocol);
    every origin may call it unless cors= names some."""
    flask_bridge.require_flask("https_fn.on_call")
    given = options.pop("cors", None)
    policy = cors_policy.policy(given if given is not None else True, default_methods=["POST"])
    assert policy is not None  # cors=False still lets a callable take its own preflights
    opts = firebase_options.translate("https_fn.on_call", options, allowed=ALLOWED)
    app = default_app()
    load_configured_verifier(app.settings.auth_verifier)

    def decorator(fn: F) -> F:
        root = f"/{fn.__name__}"

        def respond(request: Request) -> WerkzeugResponse:
            if request.method == "OPTIONS":
                return policy.preflight(request)
            try:
                response = handle(fn, request)
            except flask_bridge.Answered as answered:
                policy.decorate(request, answered.response)
                raise
            policy.decorate(request, response)
            return response

        def run(event: OncefireEvent) -> StarletteResponse:
            return flask_bridge.serve(event, root, respond)

        _register(app, run, fn, root, subpaths=False, opts=opts)
        return fn

    return decorator


def _register(
    app: Any,
    run: Callable[[OncefireEvent], Any],
    fn: Callable[..., Any],
    root: str,
    *,
    subpaths: bool,
    opts: dict[str, Any],
) -> None:
    run.__name__ = run.__qualname__ = fn.__name__
    run.__doc__ = fn.__doc__
    app.on_request(root, methods=METHODS, name=fn.__name__, subpaths=subpaths, **opts)(run)
