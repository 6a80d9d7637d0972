"""HTTP routes: the checks an `@app.on_request` path, its methods and its limits must pass."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from oncefire.errors import ConfigError

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
RESERVED_PREFIX = "/_oncefire"  # the dashboard and oncefire's own endpoints live here


def check_route(
    path: str, methods: Sequence[str], max_body_bytes: int, taken: Collection[str]
) -> tuple[str, ...]:
    """The upper-cased methods of a valid route, or ConfigError saying what to change."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigError(f"An HTTP function's path must start with '/'; got {path!r}.")
    if path == RESERVED_PREFIX or path.startswith(RESERVED_PREFIX + "/"):
        raise ConfigError(
            f"The path {path!r} is under {RESERVED_PREFIX}/, which oncefire keeps for its "
            "dashboard: choose another path."
        )
    if path in taken:
        raise ConfigError(
            f"An HTTP function is already registered on {path!r}: give each path one function "
            "and list every method it takes in methods=[...]."
        )
    if isinstance(methods, str) or not methods:
        raise ConfigError(f"methods= must be a non-empty list such as ['POST']; got {methods!r}.")
    verbs = tuple(dict.fromkeys(str(m).upper() for m in methods))
    unknown = [m for m in verbs if m not in METHODS]
    if unknown:
        raise ConfigError(
            f"Unknown HTTP method(s) {', '.join(unknown)} for {path!r}; "
            f"use {', '.join(sorted(METHODS))}."
        )
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int):
        raise ConfigError(
            f"max_body_bytes must be a whole number of bytes; got {max_body_bytes!r}."
        )
    if max_body_bytes < 0:
        raise ConfigError(f"max_body_bytes={max_body_bytes} must be 0 or more.")
    return verbs
