"""`app.functions`: the functions the store knows, when a worker last served each, their
pending deliveries, and the brake: pause, resume, forget."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncefire import unrouted
from oncefire.errors import FunctionNotFoundError
from oncefire.stores.base import FunctionRow

if TYPE_CHECKING:
    from oncefire.runtime import Runtime

__all__ = ["FORGOTTEN", "UNSERVED_AFTER", "FunctionRow", "Functions"]

# A function no worker has said it serves for this long (workers say so once a minute,
# keeper.TOUCH_EVERY) is unserved when deliveries wait for it: the dashboard's warning and the
# audit's orphan-function rule.
UNSERVED_AFTER = 300.0
FORGOTTEN = (
    "function forgotten: no worker serves it (replay it once a function of that name returns)"
)


class Functions:
    """The stored functions of an app's store: list, pause, resume, forget."""

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
