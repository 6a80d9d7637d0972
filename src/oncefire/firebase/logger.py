"""Firebase's structured logger: `logger.info("charged", order="o1", amount=5)`.

Each call is one log record whose message is a JSON object in Cloud Logging's shape:
`{"severity": "INFO", "message": "charged", "order": "o1", "amount": 5}`, written through
Python logging (logger `oncefire.firebase.logger`) at the matching level, so `oncefire run`
prints it with its other lines and any handler can take it. Arguments that are not strings
are written as JSON; a value that refers to itself becomes "[CIRCULAR]".
"""

from __future__ import annotations

import json
import logging
from enum import StrEnum
from typing import Any

__all__ = ["LogEntry", "LogSeverity", "debug", "error", "info", "log", "warn", "write"]

_log = logging.getLogger(__name__)
LogEntry = dict[str, Any]


class LogSeverity(StrEnum):
    """Cloud Logging's severities."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    NOTICE = "NOTICE"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"
    ALERT = "ALERT"
    EMERGENCY = "EMERGENCY"


LEVELS = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "NOTICE": logging.INFO,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
    "ALERT": logging.CRITICAL,
    "EMERGENCY": logging.CRITICAL,
}


def write(entry: LogEntry) -> None:
    """Write one entry (a dict with a "severity") as a JSON line."""
    severity = str(getattr(entry.get("severity"), "value", entry.get("severity", "")))
    level = LEVELS.get(severity.upper(), logging.INFO)
    line = json.dumps(_plain({**entry, "severity": severity}), ensure_ascii=False, default=str)
    _log.log(level, "%s", line)


def debug(*args: Any, **fields: Any) -> None:
    """Write a DEBUG entry."""
    write(_entry(LogSeverity.DEBUG, args, fields))


def info(*args: Any, **fields: Any) -> None:
    """Write an INFO entry."""
    write(_entry(LogSeverity.INFO, args, fields))


def log(*args: Any, **fields: Any) -> None:
    """Write a NOTICE entry (Firebase's log())."""
    write(_entry(LogSeverity.NOTICE, args, fields))


def warn(*args: Any, **fields: Any) -> None:
    """Write a WARNING entry."""
    write(_entry(LogSeverity.WARNING, args, fields))


def error(*args: Any, **fields: Any) -> None:
    """Write an ERROR entry."""
    write(_entry(LogSeverity.ERROR, args, fields))


def _entry(severity: LogSeverity, args: tuple[Any, ...], fields: dict[str, Any]) -> LogEntry:
    parts = [a if isinstance(a, str) else json.dumps(_plain(a), default=str) for a in args]
    entry: LogEntry = {"severity": severity.value, **fields}
    message = " ".join(parts)
    if message:
        entry["message"] = message
    return entry


def _plain(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """value with each reference back to itself replaced by "[CIRCULAR]"."""
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    if id(value) in seen:
        return "[CIRCULAR]"
    inner = seen | {id(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v, inner) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, inner) for item in value]
    return value
