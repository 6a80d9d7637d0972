"""What a store transaction does to be fenced by a lease (oncefire.model.fencing): one guarded read
of the delivery, which holds its row until the transaction ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from oncefire.stores.queue.types import Lease


class LeaseTx(Protocol):
    """The fencing operation of a store transaction (part of DocumentTx)."""

    def hold_lease(self, lease: Lease) -> Callable[[], bool]:
        """Check that the delivery is still running under lease, holding its row until the
        transaction ends; the answer is read when the returned function is called (on
        PostgreSQL the check goes with the transaction's next round trip)."""
