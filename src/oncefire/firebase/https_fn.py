"""HTTP functions with Firebase's names: `@https_fn.on_request()` served at `/<function name>`.

The function receives a Flask-style `Request` (`args`, `headers`, `method`, `path`, `data`,
`get_json()`, `form`) and returns an `https_fn.Response`, a str, a dict or list (JSON).
Served by `oncefire run`; see docs/triggers.md for errors and limits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from starlette.datastructures import Headers, ImmutableMultiDict, QueryParams
from starlette.responses import Response as StarletteResponse

from oncefire.errors import ConfigError, PermanentError
from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.cloudevent import adapt
from oncefire.firebase.defaults import default_app
from oncefire.http import Request as HttpRequest

__all__ = ["Request", "Response", "on_call", "on_request"]

F = TypeVar("F", bound=Callable[..., Any])
ALLOWED = frozenset({"timeout_sec", "max_instances"})
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class Request:
    """A request shaped like Flask's (what Firebase's `https_fn.Request` is)."""

    def __init__(self, request: HttpRequest) -> None:
        self._request = request

    @property
    def method(self) -> str:
        """The HTTP method."""
        return self._request.method

    @property
    def path(self) -> str:
        """The URL path."""
        return self._request.url.path

    @property
    def url(self) -> str:
        """The full URL."""
        return str(self._request.url)

    @property
    def args(self) -> QueryParams:
        """The query string's parameters (`.get(name)`, `.getlist(name)`)."""
        return self._request.query_params

    @property
    def headers(self) -> Headers:
        """The headers (case-insensitive `.get(name)`)."""
        return self._request.headers

    @property
    def cookies(self) -> Mapping[str, str]:
        """The cookies."""
        return self._request.cookies

    @property
    def remote_addr(self) -> str | None:
        """The client's address."""
        return self._request.client.host if self._request.client else None

    @property
    def content_type(self) -> str | None:
        """The Content-Type header."""
        return self._request.headers.get("content-type")

    @property
    def is_json(self) -> bool:
        """Whether the body is declared as JSON (application/json or */*+json)."""
        mimetype = (self.content_type or "").split(";")[0].strip().lower()
        return mimetype == "application/json" or mimetype.endswith("+json")

    @property
    def data(self) -> bytes:
        """The body."""
        return self._request.content

    def get_data(self, as_text: bool = False) -> bytes | str:
        """The body, as bytes or (as_text) text."""
        return self.data.decode() if as_text else self.data

    def get_json(self, force: bool = False, silent: bool = False) -> Any:
        """The JSON body; None with silent=True when it is not JSON, else a 400."""
        if not (force or self.is_json):
            if silent:
                return None
            raise PermanentError("The request's Content-Type is not application/json.")
        try:
            return json.loads(self.data)
        except ValueError:
            if silent:
                return None
            raise PermanentError("The request body is not valid JSON.") from None

    @property
    def json(self) -> Any:
        """get_json()."""
        return self.get_json()

    @property
    def form(self) -> ImmutableMultiDict[str, str]:
        """The fields of a url-encoded form body."""
        if not (self.content_type or "").startswith("application/x-www-form-urlencoded"):
            return ImmutableMultiDict()
        return ImmutableMultiDict(parse_qsl(self.data.decode(), keep_blank_values=True))


class Response(StarletteResponse):
    """A response shaped like Flask's: `Response("text", status=400, mimetype=...)`."""

    def __init__(
        self,
        response: str | bytes | None = None,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
        mimetype: str | None = None,
        content_type: str | None = None,
    ) -> None:
        super().__init__(
            response or b"",
            status or 200,
            dict(headers or {}),
            content_type or mimetype or "text/html",
        )


def on_request(**options: Any) -> Callable[[F], F]:
    """Serve the function at /<its name> for every method, as Firebase does."""
    opts = firebase_options.translate("https_fn.on_request", options, allowed=ALLOWED)
    app = default_app()

    def decorator(fn: F) -> F:
        def convert(event: OncefireEvent) -> Request:
            return Request(event.data)

        app.on_request(f"/{fn.__name__}", methods=METHODS, name=fn.__name__, **opts)(
            adapt(fn, convert)
        )
        return fn

    return decorator


def on_call(**options: Any) -> Callable[[F], F]:
    """Firebase's callable functions speak a client SDK's protocol, which oncefire does not."""
    raise ConfigError(
        "https_fn.on_call is not supported: callable functions need Firebase's client SDK. "
        "Use https_fn.on_request and read request.get_json() instead."
    )
