"""An app whose import is slow in a worker process, as a heavy app's is: each process that
loads it leaves a mark `loading-PID` in $E2E_DIR; then a worker process sleeps $SLOW_IMPORT
seconds, the supervisor $SLOW_SUPERVISOR_IMPORT (none by default)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from oncefire import App
from oncefire.events import Event

Path(os.environ["E2E_DIR"], f"loading-{os.getpid()}").touch()
if (
    getattr(getattr(sys.modules["__main__"], "__spec__", None), "name", "")
    == "oncefire.processes.supervisor"
):
    time.sleep(float(os.environ.get("SLOW_IMPORT", "0")))
else:
    time.sleep(float(os.environ.get("SLOW_SUPERVISOR_IMPORT", "0")))

app = App()


@app.on_message("pings")
def ping(event: Event) -> None:
    """Does nothing: the tests look at processes, not at what they run."""
