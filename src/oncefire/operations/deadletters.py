"""Dead letters: deliveries that will not run again until a person replays them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from oncefire.clock import to_datetime
from oncefire.errors import ConfigError, DeadLetterNotFoundError, ReplayError
from oncefire.model import codec
from oncefire.operations.redaction import redact
from oncefire.retry import is_count, is_real
from oncefire.stores.base import DeadLetterFilter, DeadLetterRow

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime

TRUNCATED_PAYLOAD_CHARS = 1024  # what a listing shows of a payload over max_payload_bytes
# Dead letters one search by error text reads, newest first: a page or an API answer takes
# the same time however many dead letters there are, and says when it did not read them all.
SEARCH_WINDOW = 10_000
# Dead letters of one error group a page counts through the index before it says "or more".
GROUP_COUNT_CAP = 100_000
# Dead letters a bulk replay or dismiss changes a transaction. One statement over a million
# would hold the store's locks throughout (SQLite's writers wait at most 15 s), and on
# PostgreSQL the dead-letter counter's row trigger would update one row once a dead letter,
# each time a new version that the next update walks past: quadratic.
BULK_BATCH = 1000


@dataclass(frozen=True, slots=True)
class BoundedCount:
    """A count that stopped at a cap: at least `count` when `is_lower_bound`."""

    count: int
    is_lower_bound: bool


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
    def from_row(cls, row: DeadLetterRow, display_limit: int | None = None) -> DeadLetter:
        """A DeadLetter from the store's row; a payload over display_limit bytes of JSON is
        shown as its first TRUNCATED_PAYLOAD_CHARS characters (the store keeps it whole)."""
        payload, is_truncated = row.payload, row.truncated
        if display_limit is not None and not is_truncated:
            size = len(codec.dumps(payload).encode())
            if size > display_limit:
                # Cut from the redacted text: a preview is text, which redact() cannot read.
                preview = codec.dumps(redact(payload))[:TRUNCATED_PAYLOAD_CHARS]
                payload = {"truncated": preview, "size": size}
                is_truncated = True
        return cls(
            row.id,
            row.function,
            row.event_id,
            row.event_type,
            row.source,
            row.attempts,
            row.error,
            to_datetime(row.failed_at),
            payload,
            is_truncated,
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


@dataclass(frozen=True, slots=True)
class ErrorSearch:
    """What a search of a function's newest dead letters by error text found. `count` is
    exact when `is_lower_bound` is false; otherwise older dead letters were not read and
    there are at least `count` matches: search on from `next_before` for the older ones."""

    text: str
    count: int  # matches among the dead letters read
    searched: int  # dead letters read, newest first
    is_lower_bound: bool  # older dead letters exist that were not read
    next_before: int | None  # pass as `before` to search the next window (when is_lower_bound)
    items: list[DeadLetter]  # the newest matches


def _filter(
    function: str | None,
    error_contains: str | None,
    since: datetime | float | None,
    until: datetime | float | None,
    error_group: str | None = None,
) -> DeadLetterFilter:
    def seconds(value: datetime | float | None) -> float | None:
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ConfigError("Give since/until as timezone-aware datetimes (UTC).")
            return value.timestamp()
        if value is not None and not is_real(value):
            raise ConfigError(
                f"since/until={value!r}: give an aware datetime or epoch seconds (a number)."
            )
        return value

    return DeadLetterFilter(function, error_contains, seconds(since), seconds(until), error_group)


MAX_DEAD_LETTER_ID = 2**63 - 1  # a 64-bit row id


def check_page(limit: Any, before: Any, most: int, what: str) -> None:
    """Refuse a page of other than 1 to `most` rows, or a `before` that is no row id."""
    if not is_count(limit) or not 1 <= limit <= most:
        raise ConfigError(f"limit={limit!r}: list between 1 and {most} {what} at a time.")
    if before is not None and (not is_count(before) or not 1 <= before <= MAX_DEAD_LETTER_ID):
        raise ConfigError(
            f"before={before!r}: ids are whole numbers from 1 to {MAX_DEAD_LETTER_ID}; pass "
            "the last id of a page to read the next one."
        )


def check_dead_letter_id(dead_letter_id: Any) -> int:
    """A dead letter id as an int, or DeadLetterNotFoundError for one no store can hold."""
    try:
        value = int(dead_letter_id)  # an int, or the digits of one (from a URL, say)
    except (TypeError, ValueError):
        raise ConfigError(f"A dead letter id is an integer; got {dead_letter_id!r}.") from None
    if isinstance(dead_letter_id, bool | float) or not 1 <= value <= MAX_DEAD_LETTER_ID:
        raise DeadLetterNotFoundError(
            f"No dead letter {dead_letter_id}: ids are whole numbers from 1 to "
            f"{MAX_DEAD_LETTER_ID}."
        )
    return value


class DeadLetters:
    """`app.dead_letters`: list, inspect, replay and dismiss dead letters."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def list(
        self,
        function: str | None = None,
        limit: int = 50,
        *,
        error_contains: str | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        before: int | None = None,
        error_group: str | None = None,
    ) -> list[DeadLetter]:
        """Newest first; pass the last id of a page as `before` for the next page. By
        function, and by a function's error group (its error's first line), a page walks an
        index only."""
        check_page(limit, before, 1000, "dead letters")
        where = _filter(function, error_contains, since, until, error_group)
        rows = self._rt.read_store.list_dead(where, limit, before)
        limit_bytes = self._rt.settings.max_payload_bytes
        return [DeadLetter.from_row(r, limit_bytes) for r in rows]

    def get(self, dead_letter_id: int, *, full: bool = False) -> DeadLetter:
        """One dead letter, or DeadLetterNotFoundError; full=True: the whole payload, even
        one over max_payload_bytes (shown truncated otherwise)."""
        row = self._rt.store.get_dead(check_dead_letter_id(dead_letter_id))
        if row is None:
            raise DeadLetterNotFoundError(
                f"No dead letter {dead_letter_id}: it was replayed, dismissed or never existed."
            )
        return DeadLetter.from_row(row, None if full else self._rt.settings.max_payload_bytes)

    def count(
        self,
        function: str | None = None,
        *,
        error_contains: str | None = None,
        error_group: str | None = None,
    ) -> int:
        """How many dead letters there are (of one function, with an error text, or in a
        function's error group); all of them or a function's: a kept counter, read at once;
        a group's: a range of an index. With error_contains it reads every dead letter of the
        filter: use search() for a count that takes the same time at any size."""
        where = _filter(function, error_contains, None, None, error_group)
        return self._rt.read_store.count_dead(where)

    def count_group(
        self, function: str, error_group: str, *, cap: int | None = None
    ) -> BoundedCount:
        """How many dead letters a function's error group holds, read through its index up
        to `cap` (default GROUP_COUNT_CAP): past it, cap and is_lower_bound. The same time
        at any size; count(function, error_group=...) counts them all."""
        cap = GROUP_COUNT_CAP if cap is None else cap
        if not 1 <= cap <= 10_000_000:
            raise ConfigError(f"cap={cap}: count between 1 and 10,000,000 dead letters.")
        found = self._rt.read_store.count_dead_up_to(function, error_group, cap)
        return BoundedCount(min(found, cap), found > cap)

    def search(
        self,
        function: str,
        error_contains: str,
        *,
        limit: int = 50,
        before: int | None = None,
        window: int | None = None,
    ) -> ErrorSearch:
        """Search a function's `window` newest dead letters (older than `before`) for errors
        containing a text, walking its index newest first: the number of matches and the
        newest `limit` of them. Unlike count(error_contains=...), which reads every dead
        letter, it reads at most `window` (default SEARCH_WINDOW) and says whether older ones
        were left unread."""
        window = SEARCH_WINDOW if window is None else window
        check_page(limit, before, 1000, "dead letters")
        if not 1 <= window <= 100_000:
            raise ConfigError(f"window={window}: search between 1 and 100,000 dead letters.")
        if not error_contains:
            raise ConfigError("Give the text to search the dead letters' errors for.")
        found = self._rt.read_store.search_dead(function, error_contains, before, window, limit)
        limit_bytes = self._rt.settings.max_payload_bytes
        return ErrorSearch(
            error_contains,
            found.matched,
            found.searched,
            found.has_older,
            found.oldest_id if found.has_older else None,
            [DeadLetter.from_row(r, limit_bytes) for r in found.rows],
        )

    def replay(self, dead_letter_id: int, *, anyway: bool = False) -> None:
        """Move the same delivery back to pending at attempt 1 with its original payload.
        ReplayError if its function is not stored (forgotten or renamed), unless anyway."""
        letter = self.get(dead_letter_id, full=True)
        if not anyway:
            self.refuse_unstored([letter.function])
        if letter.truncated:  # cut by an older oncefire, which did not keep the full payload
            raise ReplayError(
                f"Dead letter {letter.id} kept only a truncated payload (it was too large for "
                "the retry queue): publish the event again from its source instead."
            )
        if self._rt.store.replay(DeadLetterFilter(), self._rt.clock.now(), [letter.id]) != 1:
            raise DeadLetterNotFoundError(
                f"Dead letter {letter.id} was replayed or dismissed meanwhile."
            )

    def dismiss(self, dead_letter_id: int) -> None:
        """Delete the dead letter; it never runs."""
        if self._rt.store.dismiss(DeadLetterFilter(), [check_dead_letter_id(dead_letter_id)]) != 1:
            raise DeadLetterNotFoundError(
                f"No dead letter {dead_letter_id}: it was replayed, dismissed or never existed."
            )

    def replay_all(
        self,
        function: str | None = None,
        *,
        error_contains: str | None = None,
        error_group: str | None = None,
        batch: int | None = None,
        on_batch: Callable[[int], None] | None = None,
        anyway: bool = False,
    ) -> int:
        """Replay every matching dead letter (truncated ones are skipped); return how many.
        In transactions of `batch` (BULK_BATCH unless given), telling on_batch how many so
        far. ReplayError if some match of a function that is not stored, unless anyway."""
        where = _filter(function, error_contains, None, None, error_group)
        if not anyway:
            self.check_replay_all(function, error_contains, error_group)
        return self._in_batches(
            where,
            batch or BULK_BATCH,
            on_batch,
            lambda ids: self._rt.store.replay(where, self._rt.clock.now(), ids),
        )

    def dismiss_all(
        self,
        function: str | None = None,
        *,
        error_contains: str | None = None,
        error_group: str | None = None,
        batch: int | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Dismiss every matching dead letter; return how many. With batch, as replay_all."""
        where = _filter(function, error_contains, None, None, error_group)
        return self._in_batches(
            where, batch or BULK_BATCH, on_batch, lambda ids: self._rt.store.dismiss(where, ids)
        )

    def check_replay_all(
        self,
        function: str | None = None,
        error_contains: str | None = None,
        error_group: str | None = None,
    ) -> None:
        """ReplayError if a dead letter replay_all would replay is of a function the store
        does not know (see refuse_unstored)."""
        if function is None:
            counts = self._rt.store.counts(self._rt.clock.now())
            names = [name for name, c in counts.items() if c.states.get("dead")]
            where = [(n, _filter(n, error_contains, None, None, error_group)) for n in names]
            self.refuse_unstored([n for n, w in where if self._rt.store.count_dead(w)])
        else:
            self.refuse_unstored([function])

    def refuse_unstored(self, functions: Sequence[str]) -> None:
        """ReplayError naming those of these functions the store does not know: a delivery
        replayed for one would wait for no one."""
        with self._rt.store.read() as tx:
            stored = {f.name for f in tx.functions()}
        gone = sorted(set(functions) - stored)
        if gone:
            names = ", ".join(repr(name) for name in gone)
            raise ReplayError(
                f"No function {names} is stored (forgotten or renamed), so a replay would wait "
                "for no one: `oncefire functions rename OLD NEW` moves its dead letters to a "
                "function that exists, or replay anyway (--anyway) for when it returns."
            )

    def _in_batches(
        self,
        where: DeadLetterFilter,
        batch: int,
        on_batch: Callable[[int], None] | None,
        act: Callable[[Sequence[int]], int],
    ) -> int:
        done = 0
        before = None
        while rows := self._rt.store.list_dead(where, batch, before):
            done += act([r.id for r in rows])
            if on_batch is not None:
                on_batch(done)
            before = rows[-1].id
        return done
