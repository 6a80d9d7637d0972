"""Dead letters: deliveries that will not run again until a person replays them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from oncefire.clock import to_datetime
from oncefire.errors import ConfigError, DeadLetterNotFoundError, ReplayError
from oncefire.stores.base import DeadLetterFilter, DeadLetterRow

if TYPE_CHECKING:
    from oncefire.app import App


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A delivery parked after its last attempt, with the event it carried."""

    id: int
    function: str
    event_id: str
    event_type: str
    source: str
    attempts: int
    error: str | None
    failed_at: datetime
    payload: dict[str, Any]
    truncated: bool

    @classmethod
    def from_row(cls, row: DeadLetterRow) -> DeadLetter:
        """A DeadLetter from the store's row."""
        return cls(
            row.id,
            row.function,
            row.event_id,
            row.event_type,
            row.source,
            row.attempts,
            row.error,
            to_datetime(row.failed_at),
            row.payload,
            row.truncated,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for the CLI and the dashboard)."""
        return {
            "id": self.id,
            "function": self.function,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "source": self.source,
            "attempts": self.attempts,
            "error": self.error,
            "failed_at": self.failed_at.isoformat(),
            "payload": self.payload,
            "truncated": self.truncated,
        }


def _filter(
    function: str | None,
    error_contains: str | None,
    since: datetime | float | None,
    until: datetime | float | None,
) -> DeadLetterFilter:
    def seconds(value: datetime | float | None) -> float | None:
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ConfigError("Give since/until as timezone-aware datetimes (UTC).")
            return value.timestamp()
        return value

    return DeadLetterFilter(function, error_contains, seconds(since), seconds(until))


class DeadLetters:
    """`app.dead_letters`: list, inspect, replay and dismiss dead letters."""

    def __init__(self, app: App) -> None:
        self._app = app

    def list(
        self,
        function: str | None = None,
        limit: int = 50,
        *,
        error_contains: str | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        before: int | None = None,
    ) -> list[DeadLetter]:
        """Newest first; pass the last id of a page as `before` for the next page."""
        if not 1 <= limit <= 1000:
            raise ConfigError(f"limit={limit}: list between 1 and 1000 dead letters at a time.")
        where = _filter(function, error_contains, since, until)
        rows = self._app.store.list_dead(where, limit, before)
        return [DeadLetter.from_row(r) for r in rows]

    def get(self, dead_letter_id: int) -> DeadLetter:
        """One dead letter, or DeadLetterNotFoundError."""
        row = self._app.store.get_dead(int(dead_letter_id))
        if row is None:
            raise DeadLetterNotFoundError(
                f"No dead letter {dead_letter_id}: it was replayed, dismissed or never existed."
            )
        return DeadLetter.from_row(row)

    def count(self, function: str | None = None, *, error_contains: str | None = None) -> int:
        """How many dead letters there are (of one function, or with an error text)."""
        return self._app.store.count_dead(_filter(function, error_contains, None, None))

    def replay(self, dead_letter_id: int) -> None:
        """Move the same delivery back to pending at attempt 1 with its original payload."""
        letter = self.get(dead_letter_id)
        if letter.truncated:
            raise ReplayError(
                f"Dead letter {letter.id} kept only a truncated payload (it was too large for "
                "the retry queue): publish the event again from its source instead."
            )
        if self._app.store.replay(DeadLetterFilter(), self._app.clock.now(), [letter.id]) != 1:
            raise DeadLetterNotFoundError(
                f"Dead letter {letter.id} was replayed or dismissed meanwhile."
            )

    def dismiss(self, dead_letter_id: int) -> None:
        """Delete the dead letter; it never runs."""
        if self._app.store.dismiss(DeadLetterFilter(), [int(dead_letter_id)]) != 1:
            raise DeadLetterNotFoundError(
                f"No dead letter {dead_letter_id}: it was replayed, dismissed or never existed."
            )

    def replay_all(self, function: str | None = None, *, error_contains: str | None = None) -> int:
        """Replay every matching dead letter (truncated ones are skipped); return how many."""
        where = _filter(function, error_contains, None, None)
        return self._app.store.replay(where, self._app.clock.now(), None)

    def dismiss_all(self, function: str | None = None, *, error_contains: str | None = None) -> int:
        """Dismiss every matching dead letter; return how many."""
        return self._app.store.dismiss(_filter(function, error_contains, None, None), None)
