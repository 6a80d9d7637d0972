"""CORS for Firebase HTTP functions, as Firebase's `cors=` option gives it (through Flask-CORS).

A function with a policy answers every OPTIONS request itself, without running: the allowed
origin echoed in Access-Control-Allow-Origin (with `Vary: Origin`), the allowed methods, and
the headers the browser asked for. Its real responses get the same origin header. An origin
the policy does not allow gets no CORS header, so the browser refuses the response.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncefire.errors import ConfigError

if TYPE_CHECKING:
    import flask
    from werkzeug.wrappers import Response as WerkzeugResponse

ALL_METHODS = ("GET", "HEAD", "POST", "OPTIONS", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True, slots=True)
class Policy:
    """Which origins may call a function cross-origin, and with which methods."""

    origins: tuple[str | re.Pattern[str], ...]
    methods: tuple[str, ...]

    def allowed_origin(self, origin: str | None) -> str | None:
        """The Access-Control-Allow-Origin value for origin, or None when it is not allowed."""
        if not origin:
            return None
        for allowed in self.origins:
            if isinstance(allowed, re.Pattern):
                if allowed.fullmatch(origin):
                    return origin
            elif allowed == "*" or allowed.lower() == origin.lower():
                return origin
        return None

    def preflight(self, request: flask.Request) -> WerkzeugResponse:
        """The answer to an OPTIONS request: 204 with the CORS headers, the function not run."""
        from flask import Response

        response = Response(status=204)
        if self.decorate(request, response):
            response.headers["Access-Control-Allow-Methods"] = ", ".join(self.methods)
            asked = request.headers.get("Access-Control-Request-Headers")
            if asked:
                response.headers["Access-Control-Allow-Headers"] = asked
        return response

    def decorate(self, request: flask.Request, response: WerkzeugResponse) -> bool:
        """Add the origin header to response when the request's origin is allowed."""
        response.vary.add("Origin")
        origin = self.allowed_origin(request.headers.get("Origin"))
        if origin is None:
            return False
        response.headers["Access-Control-Allow-Origin"] = origin
        return True


def policy(cors: Any, *, default_methods: Sequence[str] = ALL_METHODS) -> Policy | None:
    """The policy for a `cors=` option: CorsOptions, True/False, an origin, a list of them, or
    a compiled pattern; None for no CORS."""
    from oncefire.firebase.options import CorsOptions

    if cors is None or cors is False:
        return None
    origins: Any = cors
    methods: Any = None
    if isinstance(cors, CorsOptions):
        origins, methods = cors.cors_origins, cors.cors_methods
        if origins is None:
            origins = "*"
    if origins is True:
        origins = "*"
    if isinstance(origins, str | re.Pattern):
        origins = [origins]
    if not isinstance(origins, list | tuple) or not all(
        isinstance(o, str | re.Pattern) for o in origins
    ):
        raise ConfigError(
            f"cors={cors!r}: give True, an origin such as 'https://example.com', a list of "
            "them, a re.compile(...) pattern, or options.CorsOptions(cors_origins=...)."
        )
    if methods is None:
        methods = list(default_methods)
    elif isinstance(methods, str):
        methods = [methods]
    return Policy(tuple(origins), tuple(str(m).upper() for m in methods))
