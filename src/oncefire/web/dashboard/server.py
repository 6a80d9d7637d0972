"""create_app: the dashboard as a Starlette app (mountable under a prefix), and serve()."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from contextlib import suppress
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from oncefire.app import App
from oncefire.errors import OncefireError
from oncefire.web.dashboard import api, pages
from oncefire.web.dashboard.metrics import exposition
from oncefire.web.dashboard.security import CsrfError, GuardMiddleware, check_bind, guard, refuse
from oncefire.web.dashboard.threads import off_loop

log = logging.getLogger(__name__)
PREFIX = "/_oncefire"  # where `oncefire run` mounts the dashboard beside the HTTP functions
CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"


async def healthz(request: Request) -> Response:
    """Answer ok while the process serves (no token needed)."""
    return PlainTextResponse("ok")


@off_loop
def metrics(request: Request) -> Response:
    """The store's figures in Prometheus's text format."""
    app: App = request.app.state.oncefire
    body = exposition(app)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def _status(exc: Exception) -> int:
    if isinstance(exc, CsrfError):
        return 403
    if isinstance(exc, LookupError):
        return 404
    return 400


async def on_error(request: Request, exc: Exception) -> Response:
    """OncefireError: 4xx with a one-line message, as JSON under /api/ and as a page elsewhere."""
    status = _status(exc)
    message = str(exc).splitlines()[0] if str(exc) else "The request failed."
    path = request.url.path.removeprefix(request.scope.get("root_path", ""))
    if path.startswith("/api/"):
        return refuse(status, message)
    title = {403: "Refused", 404: "Not found"}.get(status, "Cannot do that")
    return pages.error_page(request, status, title, message)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """404/405 from routing, as JSON."""
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code)


def create_app(
    app: App,
    *,
    token: str | None = None,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Iterable[str] = (),
    refresh_seconds: float = 15.0,
) -> Starlette:
    """The dashboard of an app. token: one secret (named "operator") or lines NAME=SECRET;
    tokens: {secret: name}. With neither, no sign-in is asked (bind it to 127.0.0.1 only)."""
    from oncefire.web.dashboard.security import parse_tokens

    secrets = dict(tokens or {}) | (parse_tokens(token) if token else {})
    the_guard = guard(allowed_hosts, secrets)
    static = StaticFiles(directory=str(Path(__file__).parent / "static"))
    routes = [
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Mount("/static", static, name="static"),
        *api.routes,
        *pages.routes,
    ]
    web = Starlette(
        routes=routes,
        middleware=[Middleware(GuardMiddleware, guard=the_guard, login=pages.login)],
        exception_handlers={OncefireError: on_error, HTTPException: on_http_error},
    )
    web.state.oncefire = app
    web.state.guard = the_guard
    web.state.refresh_seconds = refresh_seconds
    return web


def served_hosts(host: str, allowed_hosts: Iterable[str]) -> list[str]:
    """The Host names a dashboard bound to host answers: the given ones and host itself."""
    return [*allowed_hosts] + ([host] if host not in ("0.0.0.0", "::") else [])


def mount(
    app: App,
    host: str,
    *,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Iterable[str] = (),
    prefix: str = PREFIX,
) -> Mount:
    """The dashboard mounted under prefix, for a server bound to host (refuses a public bind
    without a token). Unnamed, so its pages' links carry the prefix."""
    check_bind(host, tokens or {})
    web = create_app(app, tokens=tokens, allowed_hosts=served_hosts(host, allowed_hosts))
    return Mount(prefix, app=web)


def serve(
    app: App,
    *,
    host: str = "127.0.0.1",
    port: int = 8787,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Iterable[str] = (),
) -> None:
    """Serve the dashboard with uvicorn until interrupted; refuses a public bind without a
    token, and a port it cannot listen on before it says where it serves."""
    import uvicorn

    from oncefire.web.server import bound

    check_bind(host, tokens or {})
    web = create_app(app, tokens=tokens, allowed_hosts=served_hosts(host, allowed_hosts))
    sock = bound(host, port)
    log.info("dashboard on http://%s:%d/", host, sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(web, log_level="warning"))
    with suppress(KeyboardInterrupt):  # Ctrl-C, raised again once served: stops, as uvicorn.run
        server.run(sockets=[sock])
