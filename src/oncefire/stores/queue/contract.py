"""The delivery queue: what a worker asks of the store to run deliveries.

A lease takes due deliveries (counting their attempt); a worker starts, renews and ends them
(complete, retry, bury, forward) or hands them back (release); a rescuer re-leases those whose
lease ran out. Every change is guarded by the delivery's state and lease token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from oncefire.events import StoredEvent
from oncefire.model.rates import RateLimit
from oncefire.stores.queue.types import Completed, Ending, Lease, Leased, Taken


class Queue(Protocol):
    """The delivery queue: lease, start, renew, end, hand back and rescue deliveries."""

    def lease_due(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
        rates: Mapping[str, RateLimit] | None = None,
        is_alone: bool = False,
        is_ahead: bool = False,
        free: int = 0,
    ) -> list[Leased]:
        """Take due pending deliveries, count their attempt, and lease them to worker. A
        function in `rates` takes at most the whole tokens of its bucket, and spends one a
        delivery leased. A solo delivery is leased only alone: a lease takes the due ones
        before the first solo one, or that one alone if it comes first and the worker holds
        nothing else (is_alone). is_ahead: the same statement marks them ahead
        (as start(..., is_ahead=True) would, see engine/turn.py), but the first started (as
        start() would) when it starts alone: `free` is 1, or it is the only one leased.
        The same as with_events(take_due(...))."""

    def take_due(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
        rates: Mapping[str, RateLimit] | None = None,
        is_alone: bool = False,
        is_ahead: bool = False,
        free: int = 0,
    ) -> list[Taken]:
        """lease_due's lease, with the events read in its statement where the database does
        that in one round trip (PostgreSQL), or left for with_events to read once the lease's
        transaction (a worker's turn: a batch) has committed (SQLite: not under the lock)."""

    def with_events(self, taken: Sequence[Taken]) -> list[Leased]:
        """What take_due took, with every event read (those it left unread in one query)."""

    def start(self, leases: Sequence[Lease], now: float, *, is_ahead: bool = False) -> set[int]:
        """Mark leased deliveries started (started_at now) if their lease holds; the ids marked.
        Only a started one whose lease ran out counts as a crashed attempt; one marked ahead
        (is_ahead, with others) is released uncounted and solo (engine/rescue.py); marked
        again, started."""

    def renew(self, leases: Sequence[Lease], now: float, lease_until: float) -> list[Lease]:
        """Extend leases still held and not yet run out; return those (the rest are lost)."""

    def complete(self, lease: Lease, result: Ending) -> bool: ...

    def complete_many(self, items: Sequence[tuple[Lease, Ending]]) -> Completed:
        """complete() for many deliveries at once, with the @idempotent records their endings
        completed (in one statement on PostgreSQL); what was written."""

    def retry(self, lease: Lease, result: Ending, run_at: float) -> bool: ...

    def bury(self, lease: Lease, result: Ending, error: str | None, truncated: str | None) -> bool:
        """Make a delivery dead; truncated, if given, replaces its stored payload."""

    def forward(
        self, lease: Lease, result: Ending, event: StoredEvent, functions: Sequence[str]
    ) -> bool:
        """Finish a delivery by publishing its event on a dead-letter topic, atomically."""

    def release(
        self, leases: Sequence[Lease], *, is_solo: bool = False, run_at: float | None = None
    ) -> int:
        """Hand running deliveries back to pending, their attempt uncounted; is_solo: each is
        leased alone from now on (see lease_due); run_at: due then (None: when they were)."""

    def expired_leases(self, now: float, functions: Sequence[str], limit: int) -> list[Leased]:
        """Running deliveries whose lease ran out before now (their worker died)."""

    def take_expired_leases(
        self, now: float, lease_until: float, functions: Sequence[str], limit: int
    ) -> list[Leased]:
        """Re-lease up to limit deliveries whose lease ran out before now to the caller until
        lease_until, atomically: two rescuers never take the same one."""

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout, returning early when another writer may have added work."""

    def next_due(self, functions: Sequence[str]) -> float | None:
        """The earliest run_at of a pending delivery, or None."""

    def rate_tokens(self, rates: Mapping[str, RateLimit], now: float) -> dict[str, float]:
        """The tokens each rate-limited function's bucket holds at `now` (read only)."""

    def later_of_key(self, delivery_id: int, limit: int) -> tuple[str | None, list[str]]:
        """A delivery's ordering key (None: none) and up to `limit` event ids waiting behind it."""

    def unkeyed_deliveries(
        self, functions: Sequence[str], limit: int
    ) -> list[tuple[int, str, int, StoredEvent]]:
        """(delivery id, function, attempt, event) of pending deliveries with no key yet."""

    def key_deliveries(
        self, keys: Sequence[tuple[int, str]], errors: Sequence[tuple[int, str]], now: float
    ) -> None:
        """Set computed ordering keys; make those that have an error instead dead letters."""
