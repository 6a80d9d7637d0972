"""`app.functions`: the functions the store knows, when a worker last served each, their
pending deliveries; pause, resume, forget; and rename, for a function renamed
in code whose deliveries wait under its old name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncefire.errors import ConfigError, FunctionNotFoundError
from oncefire.model.paths import check_id
from oncefire.operations import unrouted
from oncefire.stores.base import FunctionRow
from oncefire.stores.catalogue import rename as renaming
from oncefire.stores.catalogue.rename import Known, Renamed

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime

__all__ = ["FORGOTTEN", "UNSERVED_AFTER", "FunctionRow", "Functions", "Renamed"]

# A function no worker has said it serves for this long (workers say so once a minute,
# routing.TOUCH_EVERY) is unserved when deliveries wait for it: the dashboard's warning and the
# audit's orphan-function rule.
UNSERVED_AFTER = 300.0
FORGOTTEN = (
    "function forgotten: no worker serves it (replay it once a function of that name returns)"
)


class Functions:
    """The stored functions of an app's store: list, pause, resume, forget, rename."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def list(self) -> list[FunctionRow]:
        """Every stored function: trigger, last seen, pending count, paused."""
        return self._rt.store.function_rows()

    def get(self, name: str) -> FunctionRow:
        """One stored function; FunctionNotFoundError if the store does not know it."""
        for row in self.list():
            if row.name == name:
                return row
        raise FunctionNotFoundError(
            f"No stored function named {name!r}: `oncefire functions list` shows them."
        )

    def stranded(self) -> dict[str, int]:
        """Functions this app does not define whose deliveries wait (pending or running), with
        how many: renamed or removed in code, their work waits for no one here."""
        counts = self._rt.store.counts(self._rt.clock.now())
        waiting = {
            n: c.states.get("pending", 0) + c.states.get("running", 0) for n, c in counts.items()
        }
        return {n: w for n, w in sorted(waiting.items()) if w and n not in self._rt.triggers}

    def pause(self, name: str) -> bool:
        """Pause a function: its deliveries stay pending and nothing of it runs (an attempt
        already running ends as usual); False if it was paused already."""
        self.get(name)
        return self._rt.store.pause_function(name, self._rt.clock.now(), "paused")

    def resume(self, name: str) -> bool:
        """Resume a paused function where it stopped; False if it was not paused."""
        self.get(name)
        return self._rt.store.resume_function(name)

    def forget(self, name: str) -> int:
        """Stop routing events to a function and make its pending deliveries dead letters
        (replayable once a function of that name returns); how many became dead letters."""
        row = self.get(name)
        # What it took stays awaited: events there that no function takes are warned about.
        functions = [(row.name, row.kind, row.source)]
        unrouted.await_functions(self._rt.store, functions, self._rt.clock.now())
        buried = self._rt.store.forget_function(name, self._rt.clock.now(), FORGOTTEN)
        if buried is None:
            self.get(name)  # forgotten meanwhile: raises FunctionNotFoundError
        return buried or 0

    def rename(self, old: str, new: str) -> Renamed:
        """Move a function's deliveries (pending ones and dead letters), its history, its
        @idempotent records and its catalogue row to a new name, in one transaction: for a
        function renamed in code. FunctionNotFoundError if the store knows nothing of old;
        ConfigError if new already has deliveries (two functions' work is never merged)."""
        check_id(new, "function name")
        if new == old:
            raise ConfigError(f"{old!r} is already the function's name: give another NEW.")

        def check(of_old: Known, of_new: Known) -> None:
            if not (of_old.is_stored or of_old.has_deliveries):
                raise FunctionNotFoundError(
                    f"No stored function named {old!r} and no delivery of it: "
                    "`oncefire functions list` shows the stored functions."
                )
            if of_new.has_deliveries:
                raise ConfigError(
                    f"Function {new!r} has deliveries of its own: renaming {old!r} to it would "
                    "mix two functions' work. Rename before the code naming it serves events, "
                    "or register the old name again to finish its deliveries."
                )

        return renaming.rename(self._rt.store, old, new, check)
