"""Callable functions: the protocol Firebase's client SDKs speak to `https_fn.on_call`.

A POST of `{"data": ...}` answers 200 `{"result": ...}`; an `HttpsError(code, message,
details)` answers the code's status and `{"error": {"status", "message", "details"}}`; any
other exception 500 `INTERNAL` (its message kept out); another request 400 `INVALID_ARGUMENT`.
A bearer token goes to the verifier of `set_auth_verifier` (refused: 401 `UNAUTHENTICATED`;
no verifier: ignored). The function runs inside `auth_context.acting_as` of its caller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from oncefire.errors import ConfigError
from oncefire.firebase.http import auth_context, flask_bridge

if TYPE_CHECKING:
    import flask
    from werkzeug.wrappers import Response as WerkzeugResponse

log = logging.getLogger(__name__)
T = TypeVar("T")
_verifier: Callable[[str], AuthData] | None = None
_lock = threading.Lock()
_noted_unverified = False


class FunctionsErrorCode(StrEnum):
    """The error codes of callable functions (gRPC's), as Firebase's."""

    OK = "ok"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"
    INVALID_ARGUMENT = "invalid-argument"
    DEADLINE_EXCEEDED = "deadline-exceeded"
    NOT_FOUND = "not-found"
    ALREADY_EXISTS = "already-exists"
    PERMISSION_DENIED = "permission-denied"
    UNAUTHENTICATED = "unauthenticated"
    RESOURCE_EXHAUSTED = "resource-exhausted"
    FAILED_PRECONDITION = "failed-precondition"
    ABORTED = "aborted"
    OUT_OF_RANGE = "out-of-range"
    UNIMPLEMENTED = "unimplemented"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    DATA_LOSS = "data-loss"

    def __str__(self) -> str:
        return self.value


STATUS = {
    "ok": 200,
    "cancelled": 499,
    "unknown": 500,
    "invalid-argument": 400,
    "deadline-exceeded": 504,
    "not-found": 404,
    "already-exists": 409,
    "permission-denied": 403,
    "unauthenticated": 401,
    "resource-exhausted": 429,
    "failed-precondition": 400,
    "aborted": 409,
    "out-of-range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "data-loss": 500,
}


class HttpsError(Exception):
    """Raised by a callable function to answer the caller with an error code and message."""

    def __init__(self, code: FunctionsErrorCode, message: str, details: Any = None) -> None:
        if not isinstance(code, FunctionsErrorCode):
            raise ValueError(f"Unknown error code: {code!r}; use a FunctionsErrorCode.")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    @property
    def status(self) -> int:
        """The HTTP status the code maps to."""
        return STATUS[self.code.value]

    def _as_dict(self) -> dict[str, Any]:
        """The error as the protocol sends it."""
        wire: dict[str, Any] = {
            "status": self.code.name,
            "message": self.message,
        }
        if self.details is not None:
            wire["details"] = self.details
        return wire


@dataclass(frozen=True)
class AuthData:
    """The caller's identity, as the auth verifier found it: uid and the token's claims."""

    uid: str | None
    token: dict[str, Any]


@dataclass(frozen=True)
class AppCheckData:
    """An App Check token's claims; oncefire verifies none, so a request's `app` is None."""

    app_id: str
    token: dict[str, Any]


@dataclass(frozen=True)
class CallableRequest(Generic[T]):
    """What a callable function receives: the caller's data, auth and the raw request."""

    data: T
    raw_request: flask.Request
    app: AppCheckData | None = None
    auth: AuthData | None = None
    instance_id_token: str | None = None


def set_auth_verifier(verifier: Callable[[str], AuthData] | None) -> None:
    """Check the Bearer token of every callable request with verifier(token), which returns
    an AuthData or raises (a 401); None removes it."""
    global _verifier, _noted_unverified
    with _lock:
        _verifier = verifier
        _noted_unverified = False


def load_configured_verifier(target: str) -> None:
    """Use the verifier the setting auth_verifier names (`module:function` or
    `path/file.py:function`), unless one is set already; ConfigError when it cannot be found."""
    import importlib
    from pathlib import Path

    from oncefire.loader import load_module

    if not target or _verifier is not None:
        return
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise ConfigError(f"auth_verifier={target!r}: write it as module:function.")
    try:
        if where.endswith(".py"):
            module = load_module(Path(where))
        else:
            module = importlib.import_module(where)
    except ImportError as exc:
        raise ConfigError(f"auth_verifier={target!r}: cannot import {where}: {exc}.") from None
    found = getattr(module, name, None)
    if not callable(found):
        raise ConfigError(f"auth_verifier={target!r}: {where} has no function {name}.")
    set_auth_verifier(found)


def _auth(request: flask.Request) -> AuthData | None:
    """The caller's AuthData; HttpsError(UNAUTHENTICATED) for a token the verifier refuses."""
    global _noted_unverified
    header = request.headers.get("Authorization")
    if header is None:
        return None
    verifier = _verifier
    if verifier is None:
        with _lock:
            is_first, _noted_unverified = not _noted_unverified, True
        if is_first:
            log.warning(
                "a callable request carries an Authorization header, but no verifier is set "
                "(oncefire.firebase.set_auth_verifier): request.auth is None"
            )
        return None
    refused = HttpsError(FunctionsErrorCode.UNAUTHENTICATED, "Unauthenticated")
    scheme, _, token = header.partition(" ")
    if scheme != "Bearer" or not token.strip():
        raise refused
    try:
        found = verifier(token.strip())
    except Exception as exc:
        log.warning("callable request refused: its token failed verification: %s", exc)
        raise refused from None
    if not isinstance(found, AuthData):
        raise TypeError(f"The auth verifier returned {type(found).__name__}, not an AuthData.")
    return found


def _is_valid(request: flask.Request) -> bool:
    """A POST of a JSON object with exactly one key, data (as Firebase checks)."""
    if request.method != "POST" or request.mimetype != "application/json":
        return False
    body = request.get_json(silent=True)
    return isinstance(body, dict) and list(body) == ["data"]


def handle(fn: Callable[[CallableRequest[Any]], Any], request: flask.Request) -> WerkzeugResponse:
    """Serve one callable request; errors raise flask_bridge.Answered with their answer."""
    from flask import jsonify, make_response

    try:
        if not _is_valid(request):
            raise HttpsError(FunctionsErrorCode.INVALID_ARGUMENT, "Bad Request")
        auth = _auth(request)
        called = CallableRequest(
            data=request.get_json()["data"],
            raw_request=request,
            auth=auth,
            instance_id_token=request.headers.get("Firebase-Instance-ID-Token"),
        )
        # The writes the function makes are by its caller (firestore_fn's auth_context).
        with auth_context.acting_as(auth.uid if auth is not None else None):
            result = flask_bridge.call(fn, called)
        return jsonify(result=result)
    except HttpsError as err:
        answer = make_response(jsonify(error=err._as_dict()), err.status)
        message = f"HttpsError {err.code.name}: {err.message}"
        raise flask_bridge.Answered(answer, message, err.status < 500) from err
    except Exception as exc:
        answer = make_response(jsonify(error={"status": "INTERNAL", "message": "INTERNAL"}), 500)
        message = f"{type(exc).__name__}: {exc}"
        raise flask_bridge.Answered(answer, message, False) from exc
