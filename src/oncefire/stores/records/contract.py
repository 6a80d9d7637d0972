"""Idempotency records: the @idempotent record of a key (acquire, take over, complete,
release) and the expiry of tx.claim keys. Each operation is one statement, committed on its
own or in this thread's batch; the rules (engine) decide, the store records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from oncefire.stores.records.types import IdempotencyCompletion, IdempotencyRecord


class Records(Protocol):
    """The @idempotent records and tx.claim keys a store keeps."""

    def acquire_idempotency(self, record: IdempotencyRecord, now: float) -> bool:
        """Insert an in-progress record, replacing an expired one; False while a live one is."""

    def acquire_idempotency_many(self, rows: Sequence[IdempotencyRecord], now: float) -> set[str]:
        """acquire_idempotency for many keys (each once) in one statement; the keys acquired."""

    def idempotency_record(self, key: str) -> IdempotencyRecord | None:
        """The record of an @idempotent key, as last committed."""

    def take_over_idempotency(
        self, record: IdempotencyRecord, stale_token: str, lease_ended_by: float
    ) -> bool:
        """Replace the in-progress record of stale_token whose lease_until <= lease_ended_by
        with record; False if that record is gone, completed or held again."""

    def complete_idempotency_many(self, completions: Sequence[IdempotencyCompletion]) -> set[str]:
        """Mark each record completed with its result if its token still holds it, in one
        statement (in this thread's batch if one is open: a worker's turn writes them with
        their attempts); the keys completed."""

    def release_idempotency(self, key: str, token: str) -> bool:
        """Delete the record if token still holds it and it is in progress."""

    def release_idempotency_many(self, held: Sequence[tuple[str, str]]) -> int:
        """Delete each in-progress record (key, the start of its token) at once; how many."""

    def count_dedupe_hit(self, function: str, now: float) -> None: ...

    def purge_expired_claims(self, now: float, limit: int) -> int:
        """Delete tx.claim keys and @idempotent records whose expiry has passed; return how many."""
