"""A Firebase HTTP function's request as Flask serves it: a WSGI environ built from the
request oncefire read, a Flask request and application context around the call, and the
Flask response turned back into the server's.

The function's own path is the environ's SCRIPT_NAME and what follows it PATH_INFO, so
`request.path` is the path below the function, as Firebase gives it, and a Flask app
dispatched from inside the function sees its own routes.
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from oncefire.errors import MissingDependencyError

if TYPE_CHECKING:
    import flask
    from starlette.responses import Response as StarletteResponse
    from werkzeug.exceptions import HTTPException
    from werkzeug.wrappers import Response as WerkzeugResponse

    from oncefire.events import Event

INSTALL = "pip install 'oncefire[firebase]'"
_lock = threading.Lock()
_app: flask.Flask | None = None


def require_flask(where: str) -> Any:
    """The flask module, or MissingDependencyError saying what to install."""
    try:
        import flask
    except ImportError:
        raise MissingDependencyError(
            f"{where} needs Flask, which is not installed: {INSTALL}"
        ) from None
    return flask


def flask_app() -> flask.Flask:
    """The Flask app whose contexts every Firebase HTTP function runs in (one per process)."""
    global _app
    flask = require_flask("oncefire.firebase.https_fn")
    with _lock:
        if _app is None:
            _app = flask.Flask("oncefire.firebase")
        return _app


class Answered(Exception):
    """A handler's error answer: its response is sent and its attempt recorded as failed."""

    def __init__(self, response: WerkzeugResponse, message: str, is_permanent: bool) -> None:
        super().__init__(message)
        self.response = response
        self.is_permanent = is_permanent


def environ(event: Event, root: str) -> dict[str, Any]:
    """The WSGI environ of the request in event.data, with root as its SCRIPT_NAME."""
    request = event.data
    scope = request.scope
    body: bytes = request.content
    path: str = scope["path"]
    below = path[len(root) :] if path.startswith(root) else path
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client")
    env: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": _latin1(scope.get("root_path", "") + root),
        "PATH_INFO": _latin1(below or "/"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": client[0] if client else "",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name == "CONTENT_TYPE":
            env["CONTENT_TYPE"] = value
            continue
        if name == "CONTENT_LENGTH":
            continue  # the body's own length is set above
        key = f"HTTP_{name}"
        env[key] = f"{env[key]},{value}" if key in env else value
    return env


def serve(
    event: Event, root: str, handle: Callable[[flask.Request], WerkzeugResponse]
) -> StarletteResponse:
    """Run handle(request) inside a Flask request context; the server's response for it.
    Answered becomes oncefire's ErrorResponse (the attempt recorded as failed)."""
    from oncefire.web.http_functions import ErrorResponse, PermanentErrorResponse

    app = flask_app()
    env = environ(event, root)
    with app.request_context(env) as context:
        try:
            response = handle(context.request)
        except Answered as answered:
            kind = PermanentErrorResponse if answered.is_permanent else ErrorResponse
            raise kind(to_starlette(answered.response), str(answered)) from answered.__cause__
    return to_starlette(response)


def call(fn: Callable[..., Any], argument: Any) -> Any:
    """fn(argument), run to its end when fn is an `async def`."""
    result = fn(argument)
    if asyncio.iscoroutine(result):
        return asyncio.run(result)
    return result


def to_starlette(response: WerkzeugResponse) -> StarletteResponse:
    """The server's response for a Flask one: status, every header, the whole body."""
    from starlette.responses import Response

    try:
        body = b"".join(response.iter_encoded())
    finally:
        response.close()
    out = Response(body, status_code=response.status_code)
    kept = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.headers.items()
        if name.lower() != "content-length"
    ]
    out.raw_headers = [*kept, (b"content-length", str(len(body)).encode())]
    return out


def _latin1(text: str) -> str:
    """A path as WSGI carries it: its UTF-8 bytes read as latin-1."""
    return text.encode("utf-8").decode("latin-1")


def http_exception() -> type[HTTPException]:
    """werkzeug's HTTPException: what flask.abort() and a bad request body raise."""
    from werkzeug.exceptions import HTTPException

    return HTTPException
