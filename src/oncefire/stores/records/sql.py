"""The idempotency records contract over named queries, the same on both databases: the
@idempotent records (acquire, read, take over, complete, release), one statement each, the
expiry of tx.claim keys and records, and the count of duplicates skipped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from oncefire.model.buckets import hour_of
from oncefire.stores.connection import Statements
from oncefire.stores.records.types import IdempotencyCompletion, IdempotencyRecord


def fields_of(row: IdempotencyRecord | IdempotencyCompletion) -> dict[str, Any]:
    """A record's fields by name (dataclasses.asdict copies each value deeply, on every
    @idempotent event a worker runs)."""
    return {name: getattr(row, name) for name in row.__slots__}


def completions_arg(completions: Sequence[IdempotencyCompletion]) -> str:
    """@idempotent records to complete, as the JSON array complete_records reads."""
    return json.dumps([fields_of(c) for c in completions])


def complete_records(st: Statements, completions: Sequence[IdempotencyCompletion]) -> set[str]:
    """Complete each record its token still holds, in one statement; the keys completed."""
    if not completions:
        return set()
    return {
        row[0]
        for row in st.fetch("complete_records", {"completions": completions_arg(completions)})
    }


class SqlRecords:
    """Mixed into SqlStore: runs the named queries of `sql/<dialect>/idempotency.sql`."""

    def _one(self) -> Statements:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def _unflushed(self) -> Statements:
        """Statements committed on their own whose commit need not wait for the disk: an
        in-progress record lost in a power cut changes no outcome (docs/idempotency.md)."""
        return self._one()

    def acquire_idempotency(self, record: IdempotencyRecord, now: float) -> bool:
        """Insert an in-progress record, replacing an expired one; False while a live one is."""
        return self._unflushed().count("insert_record", {**fields_of(record), "now": now}) == 1

    def acquire_idempotency_many(self, rows: Sequence[IdempotencyRecord], now: float) -> set[str]:
        """acquire_idempotency for many keys (each once) in one statement; the keys acquired."""
        if not rows:
            return set()
        args = {"records": json.dumps([fields_of(r) for r in rows]), "now": now}
        return {row[0] for row in self._one().fetch("insert_records", args)}

    def idempotency_record(self, key: str) -> IdempotencyRecord | None:
        """The record of an @idempotent key, as last committed."""
        rows = self._one().fetch("get_record", {"key": key})
        return IdempotencyRecord(*rows[0]) if rows else None

    def take_over_idempotency(
        self, record: IdempotencyRecord, stale_token: str, lease_ended_by: float
    ) -> bool:
        """Replace the in-progress record of stale_token whose lease ended by lease_ended_by."""
        args = {**fields_of(record), "stale_token": stale_token, "lease_ended_by": lease_ended_by}
        return self._unflushed().count("take_over_record", args) == 1

    def complete_idempotency_many(self, completions: Sequence[IdempotencyCompletion]) -> set[str]:
        """Mark each record completed with its result if its token still holds it, in one
        statement; the keys completed."""
        return complete_records(self._one(), completions)

    def release_idempotency(self, key: str, token: str) -> bool:
        """Delete the record if token still holds it and it is in progress."""
        return self._one().count("release_record", {"key": key, "token": token}) == 1

    def release_idempotency_many(self, held: Sequence[tuple[str, str]]) -> int:
        """Delete each in-progress record of a key whose token starts with the one given
        (key, token start), in one statement; how many."""
        if not held:
            return 0
        rows = [{"key": key, "token": token} for key, token in held]
        return self._one().count("release_records", {"held": json.dumps(rows)})

    def count_dedupe_hit(self, function: str, now: float) -> None:
        """Count one duplicate skipped by an idempotency helper."""
        args = {"function": function, "now": now, "hour": hour_of(now)}
        self._one().execute("count_dedupe_hit", args)

    def purge_expired_claims(self, now: float, limit: int) -> int:
        """Delete tx.claim keys and @idempotent records whose expiry has passed; return how many."""
        args = {"now": now, "limit": limit}
        with self._write() as st:
            return st.count("purge_claims", args) + st.count("purge_records", args)
