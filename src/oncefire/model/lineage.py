"""Lineage: the chain of function writes an event belongs to, so that a loop is stopped.

An event written outside any function is a root (depth 0); each event a running function
writes inherits its event's root and one more depth, and at `Settings.max_event_depth` its
deliveries are dead letters at once. The running attempt sets the lineage in a context
variable; the outbox reads it. A document event also records who wrote it (`written_by`):
a callable's user, an unauthenticated caller, the CLI, or "system" inside an event function.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from oncefire.events import StoredEvent

Auth = dict[str, str]  # {"type": "user", "id": uid}, {"type": "unauthenticated"}, ...


@dataclass(frozen=True, slots=True)
class Lineage:
    """What an event written now inherits: its chain's root event, its depth, and the depth
    at which the chain is stopped."""

    root_id: str
    depth: int
    max_depth: int

    @property
    def loop_error(self) -> str | None:
        """The dead letter's error when this depth stops the chain, else None."""
        if self.depth < self.max_depth:
            return None
        return f"recursive loop stopped at depth {self.depth} (root event {self.root_id})"


CURRENT_LINEAGE: ContextVar[Lineage | None] = ContextVar("oncefire_lineage", default=None)
"""The lineage of events written in this context (None outside a function: a root)."""

CURRENT_AUTH: ContextVar[Auth | None] = ContextVar("oncefire_auth", default=None)
"""Who makes the writes of this context, when a caller says so: {"type": "user", "id": uid}
inside a signed-in callable, {"type": "unauthenticated"} for an anonymous one or the CLI."""


UNAUTHENTICATED: Auth = {"type": "unauthenticated"}


@contextmanager
def written_by(auth: Auth | None) -> Iterator[None]:
    """Within the block, the writes of this context are by auth (None: not said)."""
    token = CURRENT_AUTH.set(auth)
    try:
        yield
    finally:
        CURRENT_AUTH.reset(token)


def write_auth() -> Auth | None:
    """Who a document write made now is by: what the context says, else "system" while an
    event function runs (a worker's write), else None (not known)."""
    auth = CURRENT_AUTH.get()
    if auth is None and CURRENT_LINEAGE.get() is not None:
        return {"type": "system"}
    return auth


def carries_context() -> bool:
    """Whether events written now carry a lineage or an author, which the store's
    one-statement document write does not record."""
    return CURRENT_LINEAGE.get() is not None or CURRENT_AUTH.get() is not None


def inherited(event: StoredEvent, max_depth: int) -> Lineage:
    """The lineage of the events written while a function runs `event`."""
    return Lineage(event.root_id or event.id, event.depth + 1, max_depth)


class Running:
    """Within the block, events written in this context descend from `event`. A class, not a
    generator: it is entered once per attempt, and a generator's context manager does more
    work on each entry."""

    __slots__ = ("_lineage", "_token")

    def __init__(self, event: StoredEvent, max_depth: int) -> None:
        self._lineage = inherited(event, max_depth)

    def __enter__(self) -> None:
        self._token = CURRENT_LINEAGE.set(self._lineage)

    def __exit__(self, *exc: object) -> None:
        CURRENT_LINEAGE.reset(self._token)
