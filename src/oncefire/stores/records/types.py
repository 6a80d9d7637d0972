"""The @idempotent record and its completion, as the idempotency records contract passes them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The state of one @idempotent key: in progress under a lease, or completed."""

    key: str
    function: str
    status: str  # "in_progress" or "completed"
    token: str
    payload_hash: str
    lease_until: float
    expires_at: float
    result_json: str | None


@dataclass(frozen=True, slots=True)
class IdempotencyCompletion:
    """An @idempotent record to mark completed with its result, if its token still holds it."""

    key: str
    token: str
    completed_at: float
    expires_at: float
    result_json: str | None
