"""What people do to deliveries (replay, dismiss, replay with an edited payload, in bulk; pause,
resume, forget and rename a function; purge by hand), each recorded in the audit trail: who,
when, what, how many, and an edit's before and after."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from oncefire.errors import ConfigError, DeadLetterNotFoundError
from oncefire.events import StoredEvent
from oncefire.features import retention
from oncefire.model import codec
from oncefire.operations.deadletters import check_page
from oncefire.operations.redaction import redact, restore
from oncefire.stores import marks

if TYPE_CHECKING:
    from collections.abc import Callable

    from oncefire.engine.runtime import Runtime
    from oncefire.operations.deadletters import DeadLetters
    from oncefire.operations.functions import Functions, Renamed

LOCAL = "local"  # the actor when no token is configured (a person at this machine)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One recorded operator action."""

    id: int
    at: float
    actor: str
    action: str
    function: str | None
    target: str | None
    count: int
    detail: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def first_line(text: str | None) -> str | None:
    """The first line of an error (its traceback stays with the attempts)."""
    return None if text is None else text.splitlines()[0] if text else text


class Operators:
    """`app.operators`: the actions on deliveries that leave an audit entry, and the log."""

    def __init__(self, rt: Runtime, dead_letters: DeadLetters, functions: Functions) -> None:
        self._rt = rt
        self._dead_letters = dead_letters
        self._functions = functions

    def _record(
        self,
        writes: marks.Writes | None,
        actor: str,
        action: str,
        function: str | None,
        target: str | None,
        count: int,
        detail: dict[str, Any],
    ) -> None:
        args = {
            "at": self._rt.clock.now(),
            "actor": actor,
            "action": action,
            "function": function,
            "target": target,
            "count": count,
            "detail": codec.dumps(redact(detail)),
        }
        if writes is None:
            with marks.writing(self._rt.store) as own:
                marks.add_audit(own, **args)
        else:
            marks.add_audit(writes, **args)

    def replay(self, dead_letter_id: int, *, actor: str = LOCAL, anyway: bool = False) -> None:
        """Replay one dead letter (see DeadLetters.replay) and record it."""
        letter = self._dead_letters.get(dead_letter_id)
        self._dead_letters.replay(letter.id, anyway=anyway)
        detail = {"event_id": letter.event_id, "error": first_line(letter.error)}
        self._record(None, actor, "replay", letter.function, str(letter.id), 1, detail)

    def dismiss(self, dead_letter_id: int, *, actor: str = LOCAL) -> None:
        """Dismiss one dead letter and record it."""
        letter = self._dead_letters.get(dead_letter_id)
        self._dead_letters.dismiss(letter.id)
        detail = {"event_id": letter.event_id, "error": first_line(letter.error)}
        self._record(None, actor, "dismiss", letter.function, str(letter.id), 1, detail)

    def replay_edited(
        self, dead_letter_id: int, payload: Any, *, actor: str = LOCAL, anyway: bool = False
    ) -> str:
        """Run the dead letter's function again on a new event carrying the edited payload
        (entries left as "[redacted]" keep their original value); the dead letter goes, and
        the edit's before and after are recorded in the same transaction. The new event's id.
        ReplayError if the function is not stored, unless anyway."""
        letter = self._dead_letters.get(dead_letter_id)
        if not anyway:
            self._dead_letters.refuse_unstored([letter.function])
        if not isinstance(payload, dict):
            raise ConfigError("An edited payload must be a JSON object, like the original.")
        data = restore(payload, letter.payload)
        text = codec.dumps(data)
        codec.refuse_nul(text, "The edited payload")
        now = self._rt.clock.now()
        event = StoredEvent(
            codec.new_id(now), letter.event_type, letter.source, now, data, len(text.encode())
        )
        with marks.writing(self._rt.store) as writes:
            if writes.changed("delete_dead", id=letter.id) != 1:
                raise DeadLetterNotFoundError(
                    f"Dead letter {letter.id} was replayed or dismissed meanwhile."
                )
            writes.tx.append(event, [letter.function], now, is_new=True, data_json=text)
            detail = {
                "event_id": letter.event_id,
                "new_event_id": event.id,
                "before": letter.payload,
                "after": data,
            }
            self._record(writes, actor, "replay_edited", letter.function, str(letter.id), 1, detail)
        return event.id

    def replay_all(
        self,
        function: str | None = None,
        *,
        error_contains: str | None = None,
        error_group: str | None = None,
        actor: str = LOCAL,
        batch: int | None = None,
        on_batch: Callable[[int], None] | None = None,
        anyway: bool = False,
    ) -> int:
        """Replay every matching dead letter (see DeadLetters.replay_all) and record how many."""
        where = {"error_contains": error_contains, "error_group": error_group}
        return self._bulk("replay", function, where, actor, batch, on_batch, anyway=anyway)

    def dismiss_all(
        self,
        function: str | None = None,
        *,
        error_contains: str | None = None,
        error_group: str | None = None,
        actor: str = LOCAL,
        batch: int | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Dismiss every matching dead letter (see DeadLetters.dismiss_all) and record how many."""
        where = {"error_contains": error_contains, "error_group": error_group}
        return self._bulk("dismiss", function, where, actor, batch, on_batch)

    def _bulk(
        self,
        verb: str,
        function: str | None,
        where: dict[str, str | None],
        actor: str,
        batch: int | None,
        on_batch: Callable[[int], None] | None,
        **more: bool,
    ) -> int:
        act = getattr(self._dead_letters, f"{verb}_all")
        done: int = act(function, **where, batch=batch, on_batch=on_batch, **more)
        # The audit entry names the filter it acted on; error_group only when given.
        detail = {k: v for k, v in where.items() if k == "error_contains" or v is not None}
        self._record(None, actor, f"{verb}_all", function, None, done, detail)
        return done

    def pause(self, name: str, *, actor: str = LOCAL) -> bool:
        """Pause a function (see Functions.pause) and record it; False if already paused."""
        changed = self._functions.pause(name)
        self._record(None, actor, "pause", name, name, int(changed), {"changed": changed})
        return changed

    def resume(self, name: str, *, actor: str = LOCAL) -> bool:
        """Resume a paused function (see Functions.resume) and record it; False if not paused."""
        changed = self._functions.resume(name)
        self._record(None, actor, "resume", name, name, int(changed), {"changed": changed})
        return changed

    def forget(self, name: str, *, actor: str = LOCAL) -> int:
        """Forget a function (see Functions.forget) and record it; how many dead letters its
        pending deliveries became."""
        buried = self._functions.forget(name)
        self._record(None, actor, "forget", name, name, buried, {"dead_letters": buried})
        return buried

    def rename(self, old: str, new: str, *, actor: str = LOCAL) -> Renamed:
        """Rename a function's deliveries and history (see Functions.rename) and record it."""
        moved = self._functions.rename(old, new)
        detail = {"from": old, "to": new, "pending": moved.pending, "dead_letters": moved.dead}
        self._record(None, actor, "rename", new, old, moved.pending + moved.dead, detail)
        return moved

    def purge(self, *, actor: str = LOCAL) -> retention.PurgeCounts:
        """Purge the history retention lets go now (see App.purge) and record what went."""
        counts = retention.purge(self._rt)
        self._record(None, actor, "purge", None, None, counts.total(), counts.to_dict())
        return counts

    def audit_log(self, limit: int = 50, before: int | None = None) -> list[AuditEntry]:
        """Recorded actions, newest first; pass the last id of a page as `before`."""
        check_page(limit, before, 500, "audit entries")
        found = self._rt.store.reads.audit_log(limit, before)
        return [AuditEntry(**{**r, "detail": codec.loads(r["detail"])}) for r in found]
