"""The dashboard's guards: bind address, tokens, session cookie, CSRF, Origin, Host, CSP."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from oncefire.errors import ConfigError, OncefireError
from oncefire.operations.actions import LOCAL

TOKEN_ENV = "ONCEFIRE_DASHBOARD_TOKEN"
COOKIE = "oncefire_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
OPEN_PATHS = ("/healthz", "/login", "/static/")  # reachable without a token
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class CsrfError(OncefireError):
    """A state change without a valid CSRF token (answered 403)."""


def parse_tokens(text: str) -> dict[str, str]:
    """Tokens by their secret, from lines `NAME=SECRET` or `SECRET` (named "operator")."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, secret = line.partition("=")
        out[secret.strip() if sep else line] = name.strip() if sep else "operator"
    if any(len(secret) < 16 for secret in out):
        raise ConfigError("A dashboard token must be at least 16 characters long.")
    return out


def load_tokens(token: str | None = None, token_file: str | Path | None = None) -> dict[str, str]:
    """The tokens given, else those of the token file, else $ONCEFIRE_DASHBOARD_TOKEN."""
    if token:
        return parse_tokens(token)
    if token_file:
        try:
            return parse_tokens(Path(token_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"Cannot read the token file {token_file}: {exc.strerror}.") from exc
    return parse_tokens(os.environ.get(TOKEN_ENV, ""))


def is_loopback(host: str) -> bool:
    """Whether a bind address only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: Mapping[str, str]) -> None:
    """Refuse to listen beyond this machine without a token."""
    if not is_loopback(host) and not tokens:
        raise ConfigError(
            f"The dashboard would listen on {host} without a token: set {TOKEN_ENV} "
            "(or pass --token-file) to serve it beyond 127.0.0.1."
        )


@dataclass(frozen=True)
class Guard:
    """The tokens, allowed hosts and the key that signs sessions and CSRF tokens."""

    tokens: Mapping[str, str]
    allowed_hosts: frozenset[str]
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def sign(self, text: str) -> str:
        """An HMAC of text under the guard's key."""
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def session_of(self, secret: str) -> str:
        """The cookie value of a token (never the token itself)."""
        return self.sign(f"session:{secret}")

    def actor(self, request: Request) -> str | None:
        """The name of the token the request carries, LOCAL without tokens, None if refused."""
        if not self.tokens:
            return LOCAL
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            given = header[7:].strip()
            for secret, name in self.tokens.items():
                if hmac.compare_digest(given, secret):
                    return name
            return None
        cookie = request.cookies.get(COOKIE, "")
        for secret, name in self.tokens.items():
            if cookie and hmac.compare_digest(cookie, self.session_of(secret)):
                return name
        return None

    def csrf_token(self, request: Request) -> str:
        """The CSRF token of the request's session (forms carry it in a hidden field)."""
        return self.sign(f"csrf:{request.cookies.get(COOKIE, '')}")

    def host_allowed(self, request: Request) -> bool:
        """Whether the Host header names this dashboard."""
        host = request.headers.get("host", "")
        name = urlsplit(f"//{host}").hostname or ""
        return name in self.allowed_hosts or "*" in self.allowed_hosts

    def origin_allowed(self, request: Request) -> bool:
        """A state change must come from a page of this dashboard (or from no browser)."""
        origin = request.headers.get("origin") or request.headers.get("referer")
        if not origin:
            return request.headers.get("sec-fetch-site") in (None, "same-origin", "none")
        parts = urlsplit(origin)
        return parts.netloc == request.headers.get("host", "")


def guard(allowed: Iterable[str], tokens: Mapping[str, str]) -> Guard:
    """A Guard allowing the loopback names and the given hosts."""
    hosts = {"127.0.0.1", "localhost", "::1", *allowed}
    return Guard(dict(tokens), frozenset(hosts))


def refuse(status: int, message: str) -> JSONResponse:
    """A one-line JSON error."""
    return JSONResponse({"error": message}, status_code=status)


class GuardMiddleware(BaseHTTPMiddleware):
    """Host allowlist, authentication, the Origin check of every POST, security headers."""

    def __init__(self, app: object, guard: Guard, login: Callable[[Request], Awaitable[Response]]):
        super().__init__(app)  # type: ignore[arg-type]
        self.guard = guard
        self.login = login

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await self._check(request, call_next)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    async def _check(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if not self.guard.host_allowed(request):
            return refuse(400, "This Host is not one the dashboard serves.")
        path = request.url.path.removeprefix(request.scope.get("root_path", ""))
        if request.method not in ("GET", "HEAD", "OPTIONS") and not self.guard.origin_allowed(
            request
        ):
            return refuse(403, "A state change must come from the dashboard's own pages.")
        actor = self.guard.actor(request)
        if actor is None and not path.startswith(OPEN_PATHS):
            if path.startswith(("/api/", "/metrics")):
                return refuse(401, "Give the dashboard token as 'Authorization: Bearer TOKEN'.")
            response = await self.login(request)
            response.status_code = 401
            return response
        request.state.actor = actor
        return await call_next(request)


async def require_csrf(request: Request) -> None:
    """Refuse a state change without the session's CSRF token (a bearer token needs none)."""
    guard: Guard = request.app.state.guard
    if request.headers.get("authorization", "").lower().startswith("bearer ") and guard.tokens:
        return
    given = request.headers.get(CSRF_HEADER)
    if given is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        given = str((await request.form()).get(CSRF_FIELD) or "")
    if not given or not hmac.compare_digest(given, guard.csrf_token(request)):
        raise CsrfError("The form's CSRF token is missing or stale: reload the page.")
