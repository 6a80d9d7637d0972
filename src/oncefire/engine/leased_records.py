"""@idempotent records acquired with the lease of their deliveries: one statement per turn.

When a turn leases deliveries of a function that is itself @idempotent with the default key
(the event id), it acquires their records in the same transaction; an attempt finds its
record held (Leased.acquired) and runs, or acquires its own when the turn could not or when
it starts later than idempotency.QUEUED_FOR. A record's token starts "<delivery>.<attempt>.",
so whoever releases a delivery that never ran releases its record too (release,
release_rescued); a delivery that may have run keeps it (takeable_at).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from oncefire.idempotency import (
    IN_PROGRESS,
    TAKE_OVER_AFTER,
    IdempotencySpec,
    by_event_id,
    hash_of,
    record_key,
)
from oncefire.model import codec
from oncefire.stores.base import IdempotencyRecord, Leased, Taken

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime
    from oncefire.triggers import Trigger


def spec_of(trigger: Trigger) -> IdempotencySpec | None:
    """The @idempotent settings of a trigger's function if its worker acquires its records
    with the lease: the function itself is @idempotent, with the default key."""
    spec: IdempotencySpec | None = getattr(trigger.fn, "__oncefire_idempotent__", None)
    return spec if spec is not None and spec.key is by_event_id else None


def _registered_spec(rt: Runtime, function: str) -> IdempotencySpec | None:
    """spec_of a function registered in this process (None if it is not, or has none)."""
    return spec_of(rt.triggers[function]) if function in rt.triggers else None


def token_start(delivery_id: int, attempt: int) -> str:
    """How the token of a record acquired with a delivery's lease starts."""
    return f"{delivery_id}.{attempt}."


def acquire(rt: Runtime, taken: Sequence[Taken]) -> list[Leased] | None:
    """In a turn's transaction, after its lease: the deliveries taken, with their events and
    the records acquired for them (one statement); None if no function of theirs has its
    records acquired here (their events are then read after the commit)."""
    specs = {name: spec_of(rt.triggers[name]) for name in {t.function for t in taken}}
    if not any(specs.values()):
        return None
    leased = rt.store.with_events(taken)
    now = rt.clock.now()
    wanted: dict[str, tuple[int, IdempotencyRecord]] = {}  # by key: (index in leased, record)
    for i, item in enumerate(leased):
        spec = specs[item.function]
        if spec is not None and not isinstance(item.event.data, codec.Undecodable):
            record = _record(spec, item, now)
            wanted.setdefault(record.key, (i, record))  # a key once a statement
    acquired = rt.store.acquire_idempotency_many([r for _, r in wanted.values()], now)
    for i, record in wanted.values():
        if record.key in acquired:
            leased[i] = replace(leased[i], acquired=record)
    return leased


def _record(spec: IdempotencySpec, item: Leased, now: float) -> IdempotencyRecord:
    """The in-progress record of a leased delivery's key, as its attempt would acquire it."""
    return IdempotencyRecord(
        record_key(item.function, spec.helper, item.event.id),
        item.function,
        IN_PROGRESS,
        token_start(item.lease.delivery_id, item.attempt) + uuid.uuid4().hex,
        hash_of(item.event.data, spec.owner),
        now + spec.lease,
        now + max(spec.ttl, spec.lease),
        None,
    )


def release(rt: Runtime, records: Iterable[IdempotencyRecord | None]) -> None:
    """Release records acquired with leases whose attempts never called their function."""
    held = [(r.key, r.token) for r in records if r is not None]
    if held:
        rt.store.release_idempotency_many(held)


def takeable_at(rt: Runtime, item: Leased, now: float) -> float | None:
    """When the record a stopped worker acquired with a rescued delivery's lease may be taken
    over, at the latest (None: its function has none). It was acquired with the lease, at
    least the worker's lease (settings.lease) before now, for the @idempotent lease; then
    TAKE_OVER_AFTER lets its holder, perhaps alive, complete it first. A rescued delivery
    that may have run (marked ahead) keeps its record and is due then, so a stalled worker
    that wakes up meanwhile does not repeat the effect beside it."""
    spec = _registered_spec(rt, item.function)
    if spec is None:
        return None
    return now + max(0.0, spec.lease - rt.settings.lease) + TAKE_OVER_AFTER


def release_rescued(rt: Runtime, items: Sequence[Leased]) -> None:
    """Release the records a stopped worker acquired with the leases of deliveries it never
    started, released to run again uncounted."""
    held = []
    for item in items:
        spec = _registered_spec(rt, item.function)
        if spec is not None:
            key = record_key(item.function, spec.helper, item.event.id)
            held.append((key, token_start(item.lease.delivery_id, item.attempt)))
    if held:
        rt.store.release_idempotency_many(held)
