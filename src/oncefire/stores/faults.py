"""A test hook that fails the k-th statement a store runs (tests/faults sweeps every k).

A plan fails statement number `at` either before it runs, or after it ran but before the
caller sees its result: for a COMMIT, the transaction is committed and the caller is told it
failed (the ambiguous commit). Off (FAULTS is None, always outside tests) it costs one global
read a statement.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from oncefire.errors import StoreError


class InjectedFault(StoreError):
    """The failure a FaultPlan injects, as the store would report a lost connection."""


@dataclass
class FaultPlan:
    """Fail statement number `at` (from 1) before it runs, or after it ran (is_after)."""

    at: int
    is_after: bool = False
    seen: int = 0
    fired: str | None = None  # the statement that was failed
    names: list[str] = field(default_factory=list)  # the statements counted, in order
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def before(self, name: str) -> None:
        """Count a statement about to run; fail it if it is the planned one."""
        with self._lock:
            self.seen += 1
            self.names.append(" ".join(name.split())[:60])
            is_due = self.seen == self.at and not self.is_after
        if is_due:
            self._fire(name, "before it ran")

    def after(self, name: str) -> None:
        """A counted statement ran; fail the caller if it is the planned one."""
        with self._lock:
            is_due = self.seen == self.at and self.is_after and self.fired is None
        if is_due:
            self._fire(name, "after it ran")

    def _fire(self, name: str, when: str) -> None:
        self.fired = self.names[-1] if self.names else name
        raise InjectedFault(f"Injected fault at statement {self.at} ({self.fired}), {when}.")


FAULTS: FaultPlan | None = None


def before(name: str) -> None:
    """Called before each statement a store runs."""
    if FAULTS is not None:
        FAULTS.before(name)


def after(name: str) -> None:
    """Called after each statement a store ran, before its result is returned."""
    if FAULTS is not None:
        FAULTS.after(name)
