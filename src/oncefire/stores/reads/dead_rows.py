"""Dead letters as the store keeps them: their rows, the filters that select them, and the
error group a dead letter is counted and listed under."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DeadLetterRow:
    """A dead delivery with its event, as stored."""

    id: int
    function: str
    event_id: str
    event_type: str
    source: str
    attempts: int
    error: str | None
    failed_at: float
    payload: dict[str, Any]
    truncated: bool


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    """Which dead letters an operation applies to; None means any."""

    function: str | None = None
    error_contains: str | None = None
    since: float | None = None
    until: float | None = None
    error_group: str | None = None  # the first line of the error (see error_group_of)


@dataclass(frozen=True, slots=True)
class DeadSearchRows:
    """What a search of a window of a function's newest dead letters by error text found."""

    searched: int  # dead letters in the window
    matched: int  # of them, those whose error contains the text
    oldest_id: int | None  # the window's oldest id (None: the window is empty)
    has_older: bool  # dead letters older than the window exist (not searched)
    rows: list[DeadLetterRow]  # the newest matches, at most the limit asked for


ERROR_GROUP_CHARS = 120


def error_group_of(error: str | None) -> str:
    """A dead letter's error group: the first line of its error, 120 characters at most."""
    return (error or "").split("\n", 1)[0][:ERROR_GROUP_CHARS]
