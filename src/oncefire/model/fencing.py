"""Fencing: a function's own store transactions commit only while its attempt holds the lease.

While an attempt runs, its context holds the delivery's lease. A document transaction opened
in that context (`app.db.transaction()`, `tx.claim`, and a plain `ref.set()`, which is one)
checks inside itself that the delivery is still running under that lease token, and holds
the row while it lasts: a takeover after a stall, or a failover that lost the delivery, makes
it raise LeaseLostError, and nothing of it is written.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

from oncefire.errors import LeaseLostError

if TYPE_CHECKING:
    from oncefire.stores.queue.lease_tx import LeaseTx
    from oncefire.stores.queue.types import Lease

CURRENT_LEASE: ContextVar[Lease | None] = ContextVar("oncefire_lease", default=None)
"""The lease of the attempt running in this context (None outside an attempt)."""


class Holding:
    """Within the block, store transactions in this context are fenced by `lease`. A class,
    as lineage.Running, entered once per attempt."""

    __slots__ = ("_lease", "_token")

    def __init__(self, lease: Lease) -> None:
        self._lease = lease

    def __enter__(self) -> None:
        self._token = CURRENT_LEASE.set(self._lease)

    def __exit__(self, *exc: object) -> None:
        CURRENT_LEASE.reset(self._token)


def hold(tx: LeaseTx) -> Callable[[], None]:
    """Fence a transaction just begun by the lease of the attempt running in this context, if
    any; the function returned raises LeaseLostError (before the commit) if it was not held."""
    lease = CURRENT_LEASE.get()
    if lease is None:
        return _unfenced
    is_held = tx.hold_lease(lease)

    def check() -> None:
        if not is_held():
            raise lost(lease)

    return check


def _unfenced() -> None:
    """Outside an attempt there is no lease to check."""


def lost(lease: Lease) -> LeaseLostError:
    """The error of a transaction whose attempt no longer holds its delivery."""
    return LeaseLostError(
        f"Delivery {lease.delivery_id} is no longer leased to this attempt (another worker "
        "took it over, or a database failover lost it): this transaction wrote nothing. Its "
        "delivery runs again where the store still holds it."
    )
