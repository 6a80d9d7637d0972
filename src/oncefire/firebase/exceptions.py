"""firebase_admin's error classes for what the stand-ins refuse: `exceptions.AlreadyExistsError`
for a task id already used, `exceptions.NotFoundError` for a queue or an object that does not
exist. Each is an OncefireError, and `code` is Firebase's code for it."""

from __future__ import annotations

from typing import Any

from oncefire.errors import OncefireError

ALREADY_EXISTS = "ALREADY_EXISTS"
NOT_FOUND = "NOT_FOUND"
INVALID_ARGUMENT = "INVALID_ARGUMENT"


class FirebaseError(OncefireError):
    """What firebase_admin raises: an error with Firebase's `code` (`ALREADY_EXISTS`, ...)."""

    def __init__(
        self, code: str, message: str, cause: Any = None, http_response: Any = None
    ) -> None:
        super().__init__(message)
        self._code = code
        self._cause = cause
        self._http_response = http_response

    @property
    def code(self) -> str:
        """Firebase's error code."""
        return self._code

    @property
    def cause(self) -> Any:
        """The error that caused this one, if any."""
        return self._cause

    @property
    def http_response(self) -> Any:
        """None here: no Google API was called."""
        return self._http_response


class AlreadyExistsError(FirebaseError):
    """What was to be created exists already (a task id in use)."""

    def __init__(self, message: str, cause: Any = None, http_response: Any = None) -> None:
        super().__init__(ALREADY_EXISTS, message, cause, http_response)


class NotFoundError(FirebaseError, LookupError):
    """What was named does not exist (a task queue, an object)."""

    def __init__(self, message: str, cause: Any = None, http_response: Any = None) -> None:
        super().__init__(NOT_FOUND, message, cause, http_response)
